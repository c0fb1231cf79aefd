"""The pipeline commits per `batch_size` records or every COMMIT_EVERY_S seconds, whichever
comes first (issue #23.2): a slow source's records are stored while it still runs."""
from basecrawler.pipeline import crawler as crawler_module
from support import ItemsCrawler


class Slow(ItemsCrawler):
    source = "slow"
    how_many = 4

    def fetch(self):
        for n in range(1, self.how_many + 1):
            # What the store holds when item n is fetched: everything parsed before it, since
            # the commit deadline (0 s here) has passed at every record.
            self.seen.append(self.store.lookup.count("vehicle_recall", self.source))
            yield n

    def parse(self, raw):
        return {"recall_number": f"S{raw}", "recall_date": "2024-05-01", "summary_original": f"s {raw}"}


def test_a_commit_is_due_by_time_even_below_batch_size(store, settings, monkeypatch):
    monkeypatch.setattr(crawler_module, "COMMIT_EVERY_S", 0.0)
    crawler = Slow(store, settings=settings.with_(batch_size=1000), mode="full")
    crawler.seen = []
    result = crawler.run()
    assert result.status == "succeeded" and result.counts.new == 4
    assert crawler.seen == [0, 1, 2, 3]


def test_without_the_deadline_records_wait_for_batch_size(store, settings, monkeypatch):
    monkeypatch.setattr(crawler_module, "COMMIT_EVERY_S", 3600.0)
    crawler = Slow(store, settings=settings.with_(batch_size=1000), mode="full")
    crawler.seen = []
    assert crawler.run().counts.new == 4
    assert crawler.seen == [0, 0, 0, 0]


class Wordy(Slow):
    """Records of ~2 KB each (their input as the pipeline hashes it: `Intake.batch_full`)."""
    source = "wordy"
    how_many = 6

    def parse(self, raw):
        return {"recall_number": f"W{raw}", "recall_date": "2024-05-01", "summary_original": "x" * 2000}


def test_a_batch_of_large_records_is_stored_by_its_bytes_before_its_count(store, settings, monkeypatch):
    """A batch is bounded in memory as well as in records: two ~2 KB records pass a 4,000-byte
    bound, so every second record ends a batch, far below batch_size."""
    monkeypatch.setattr(crawler_module, "COMMIT_EVERY_S", 3600.0)
    crawler = Wordy(store, settings=settings.with_(batch_size=1000, batch_bytes=4000), mode="full")
    crawler.seen = []
    assert crawler.run().counts.new == 6
    assert crawler.seen == [0, 0, 2, 2, 4, 4]


def test_below_the_byte_bound_large_records_wait_for_batch_size(store, settings, monkeypatch):
    monkeypatch.setattr(crawler_module, "COMMIT_EVERY_S", 3600.0)
    crawler = Wordy(store, settings=settings.with_(batch_size=1000, batch_bytes=1 << 30), mode="full")
    crawler.seen = []
    assert crawler.run().counts.new == 6
    assert crawler.seen == [0] * 6


def test_records_recognised_unchanged_do_not_fill_a_batch(store, settings, monkeypatch):
    """A re-run's unchanged records are counted, not held for the store: their bytes end no
    batch, so the run commits once at its end, not every second record."""
    monkeypatch.setattr(crawler_module, "COMMIT_EVERY_S", 3600.0)
    bounded = settings.with_(batch_size=1000, batch_bytes=4000)
    first = Wordy(store, settings=bounded, mode="full")
    first.seen = []
    assert first.run().counts.new == 6
    flushes = []
    flush = crawler_module.BaseCrawler._flush_all
    monkeypatch.setattr(crawler_module.BaseCrawler, "_flush_all", lambda self: flushes.append(1) or flush(self))
    again = Wordy(store, settings=bounded, mode="full")
    again.seen = []
    assert again.run().counts.unchanged == 6
    assert len(flushes) == 1
