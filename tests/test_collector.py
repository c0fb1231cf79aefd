"""A run collects garbage less often and leaves the process's thresholds as it found them."""
import gc
import threading

from basecrawler import BaseCrawler, Store
from basecrawler.pipeline.collector import RUN_THRESHOLDS, fewer_collections
from support import ItemsCrawler


class Seen(BaseCrawler):
    source = "tst"
    country = "US"

    def fetch(self):
        self.during = gc.get_threshold()
        yield {"recall_number": "1", "recall_date": "2024-01-01"}

    def parse(self, raw):
        return raw


def test_a_run_raises_the_thresholds_and_puts_them_back(tmp_path):
    before = gc.get_threshold()
    crawler = Seen(Store(tmp_path / "s.db"), mode="full")
    assert crawler.run().counts.new == 1
    assert crawler.during[0] == max(RUN_THRESHOLDS[0], before[0])
    assert gc.get_threshold() == before


class Many(ItemsCrawler):
    def parse(self, raw):
        return raw


def _recalls(count: int) -> list[dict]:
    return [{"recall_number": f"24V{n:06d}", "recall_date": "2024-01-01", "manufacturer_original": "Ford",
             "summary_original": f"The air bag inflator may rupture (case {n}).", "extra": {"type": "V"}}
            for n in range(count)]


def test_a_first_import_does_not_collect_the_batches_it_is_making(tmp_path):
    """A young collection during a run walks the batch being made and, as a run makes almost no
    cyclic garbage, finds nothing: a run of two batches' worth meets almost none."""
    # (what a first run imports, done once beforehand)
    assert Many(Store(tmp_path / "warm.db"), mode="full", items=_recalls(10)).run().counts.new == 10
    store, items = Store(tmp_path / "s.db"), _recalls(20_000)
    young = []

    def count(phase, info):
        if phase == "stop" and info["generation"] == 0:
            young.append(info["collected"])
    gc.callbacks.append(count)
    try:
        result = Many(store, mode="full", items=items).run()
    finally:
        gc.callbacks.remove(count)
    assert result.counts.new == 20_000
    assert len(young) <= 2, f"{len(young)} young collections during the run (found {sum(young)} objects)"


def test_overlapping_runs_restore_once_the_last_one_ends():
    before = gc.get_threshold()
    first_in, release = threading.Event(), threading.Event()

    def other():
        with fewer_collections():
            first_in.set()
            release.wait(5)

    thread = threading.Thread(target=other)
    thread.start()
    first_in.wait(5)
    with fewer_collections():
        pass
    assert gc.get_threshold()[0] == max(RUN_THRESHOLDS[0], before[0])   # the other run is still going
    release.set()
    thread.join(5)
    assert gc.get_threshold() == before
