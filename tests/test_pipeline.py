"""BaseCrawler.run(): the fixed pipeline end to end with a demo source defined here."""
import datetime as dt
import json


from basecrawler import Recall

from support import ItemsCrawler, row_writes
from basecrawler.store.engines.dialect import dialect_of


class DemoCrawler(ItemsCrawler):
    source = "demo"

    def parse(self, raw):
        if raw.get("explode"):
            raise KeyError("title")
        return {
            "recall_number": raw["id"],
            "recall_date": raw.get("date"),
            "manufacturer_original": raw.get("maker"),
            "model_original": raw.get("model"),
            "summary_original": raw.get("summary"),
            "affected_units": raw.get("units"),
        }


def item(n, **kw):
    base = {"id": f"R{n}", "date": "2024-05-01", "maker": "Acme", "model": f"M{n}", "summary": f"Summary {n}", "units": "1,200"}
    base.update(kw)
    return base


def run(store, items, settings, **kw):
    return DemoCrawler(store, items=items, settings=settings, **kw).run()


def test_demo_source_runs_end_to_end(store, settings):
    # The input: three items R1..R3 (item() above), each dated 2024-05-01 with maker "Acme"
    # and units "1,200"; a full run has no date window, and the store starts empty.
    result = run(store, [item(1), item(2), item(3)], settings, mode="full")
    assert result.status == "succeeded"
    c = result.counts
    # 3 items fetched, all 3 parse, all 3 are saved and all 3 are new (empty store).
    assert (c.fetched, c.parsed, c.saved, c.new) == (3, 3, 3, 3)
    row = store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "R2"})
    # item(2): maker "Acme", units "1,200" -> the integer 1200; source/lang from DemoCrawler.
    assert row["manufacturer_original"] == "Acme" and row["affected_units"] == 1200
    assert row["recall_date"] == "2024-05-01" and row["model_original"] == "M2"
    assert row["source"] == "demo" and row["source_lang"] == "en"
    runs = store.query(dialect_of(store).query("SELECT * FROM crawl_runs"))
    assert len(runs) == 1
    run_row = runs[0]
    assert run_row["status"] == "succeeded" and run_row["source"] == "demo" and run_row["mode"] == "full"
    # The run's row holds the same hand counts: 3 in, 3 out, nothing out of range, nothing lost.
    assert {k: run_row[k] for k in ("fetched", "parsed", "out_of_range", "saved", "new", "updated",
                                     "unchanged", "unparseable", "dead_lettered")} == \
        {"fetched": 3, "parsed": 3, "out_of_range": 0, "saved": 3, "new": 3, "updated": 0,
         "unchanged": 0, "unparseable": 0, "dead_lettered": 0}
    # The summary line names the source and states those counts, in pipeline order.
    summary = run_row["summary"]
    assert summary.startswith("demo: ")
    stages = ["fetched 3", "parsed 3", "out of range 0", "saved 3", "new 3", "updated 0", "unchanged 0"]
    positions = [summary.find(stage) for stage in stages]
    assert -1 not in positions and positions == sorted(positions), summary


def test_missing_field_in_second_crawl_keeps_stored_value(store, settings):
    run(store, [item(1)], settings)
    result = run(store, [item(1, maker=None, summary="")], settings)
    row = store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "R1"})
    assert row["manufacturer_original"] == "Acme"
    assert row["summary_original"] == "Summary 1"
    assert result.counts.unchanged == 1 and result.counts.updated == 0


def test_changed_value_updates_and_clears_its_translation(store, settings):
    run(store, [item(1)], settings)
    store.write(lambda db: db.conn.execute(
        dialect_of(db.conn).write("UPDATE recalls SET summary_ko='요약', model_ko='모델', translated_at='2024-01-01T00:00:00+00:00', "
        "translation_status='translated'")))
    result = run(store, [item(1, summary="Summary 1, revised")], settings)
    row = store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "R1"})
    assert result.counts.updated == 1
    assert row["summary_original"] == "Summary 1, revised"
    assert row["summary_ko"] is None
    assert row["model_ko"] == "모델"            # unchanged original keeps its translation
    assert row["translated_at"] is None        # the row is queued for translation again


def test_rerun_of_identical_data_writes_nothing(store, settings):
    """A re-run over the same items writes no recall row: 0 inserts, updates or deletes on
    `recalls` (counted by triggers, so an UPDATE that sets the same values counts too). The
    only table the run may write is its own bookkeeping, `crawl_runs` (the run's row)."""
    run(store, [item(1), item(2)], settings)
    before = store.query("SELECT * FROM recalls ORDER BY id")
    with row_writes(store) as writes:
        result = run(store, [item(1), item(2)], settings)
    assert (result.counts.new, result.counts.updated, result.counts.unchanged) == (0, 0, 2)
    assert writes["recalls"] == 0
    assert set(writes.by_table) == {"crawl_runs"}, writes.by_table
    assert store.query("SELECT * FROM recalls ORDER BY id") == before


def test_parse_and_validation_failures_become_dead_letters(store, settings):
    items = [item(1), {"id": "R2", "explode": True}, item(3, units="many"), item(4)]
    result = run(store, items, settings)
    assert result.status == "succeeded"
    assert result.counts.unparseable == 2 and result.counts.dead_lettered == 2 and result.counts.saved == 2
    letters = store.dead_letters.open_dead_letters("demo")
    kinds = sorted(l["kind"] for l in letters)
    assert kinds == ["parse_error", "validation"]
    raws = [json.loads(l["raw"]) for l in letters]
    assert {"id": "R2", "explode": True} in raws
    assert any(r.get("units") == "many" for r in raws)
    assert "affected_units" in next(l["error"] for l in letters if l["kind"] == "validation")


def test_unparseable_date_is_kept_with_sentinel_and_never_filtered(store, settings):
    result = run(store, [item(1, date="31/02/2024"), item(2, date="2020-01-01")], settings,
                 since=dt.date(2024, 1, 1))
    assert result.counts.out_of_range == 1
    row = store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "R1"})
    assert row["date_unknown"] == 1 and row["recall_date"] == "1970-01-01"
    assert store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "R2"}) is None


def test_incremental_window_is_newest_minus_overlap(store, settings):
    run(store, [item(1, date="2024-05-30")], settings)
    crawler = DemoCrawler(store, items=[item(2, date="2024-05-10"), item(3, date="2024-05-20")], settings=settings)
    result = crawler.run()
    assert crawler.since == dt.date(2024, 5, 16)
    assert result.counts.out_of_range == 1 and result.counts.new == 1


def test_batch_with_one_breaking_row_stores_all_others(store, settings):
    # A trigger that refuses one specific row stands in for any row the database rejects.
    store.db.execute("CREATE TRIGGER refuse_r13 BEFORE INSERT ON recalls WHEN new.recall_number = 'R13' "
                     "BEGIN SELECT RAISE(ABORT, 'refused row'); END")
    items = [item(n) for n in range(1, 41)]
    result = run(store, items, settings.with_(batch_size=40))
    assert result.counts.saved == 39 and result.counts.dead_lettered == 1
    assert store.lookup.count("vehicle_recall", "demo") == 39
    letter = store.dead_letters.open_dead_letters("demo")[0]
    assert letter["stage"] == "store" and "refused row" in letter["error"] and letter["record_key"] == "R13"
    assert json.loads(letter["raw"])["id"] == "R13"


def test_full_run_with_nothing_is_suspect(store, settings):
    result = run(store, [], settings, mode="full")
    assert result.status == "suspect"


def test_mostly_unparseable_run_is_suspect(store, settings):
    result = run(store, [item(1), {"id": "x", "explode": True}, {"id": "y", "explode": True}], settings, mode="full")
    assert result.status == "suspect"


def test_fetch_failure_keeps_records_fetched_before_it(store, settings):
    class Breaking(DemoCrawler):
        source = "demo"

        def fetch(self):
            yield item(1)
            raise RuntimeError("listing page 2 vanished")

    result = Breaking(store, settings=settings).run()
    assert result.status == "failed" and "listing page 2 vanished" in result.error
    assert store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "R1"}) is not None
    assert store.runs.last_run("demo")["status"] == "failed"


def test_parse_may_return_many_records_or_none(store, settings):
    class Many(DemoCrawler):
        def parse(self, raw):
            if raw == "skip":
                return None
            return [{"recall_number": f"{raw}-{i}", "recall_date": "2024-01-01"} for i in range(3)]

    result = Many(store, items=["a", "skip", "b"], settings=settings).run()
    assert result.counts.fetched == 3 and result.counts.parsed == 6 and result.counts.new == 6


def test_endpoint_override_changes_scheme_and_host_only(store, settings, monkeypatch):
    crawler = DemoCrawler(store, settings=settings)
    assert crawler.url("site", "/recalls?page=2") == "https://demo.example/recalls?page=2"
    monkeypatch.setenv("BASECRAWLER_DEMO_SITE_URL", "http://127.0.0.1:8123/ignored/path")
    assert crawler.url("site", "/recalls?page=2") == "http://127.0.0.1:8123/recalls?page=2"


def test_control_characters_are_removed_from_text(store, settings):
    run(store, [item(1, summary="Brake\x00 hose\x1b[31m may\r\nleak")], settings)
    assert store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "R1"})["summary_original"] == "Brake hose[31m may\nleak"


def test_runaway_text_field_is_a_dead_letter_not_a_stored_value(store, settings):
    result = run(store, [item(1, summary="x" * 10_000_000), item(2)], settings)
    assert result.counts.dead_lettered == 1 and store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "R1"}) is None
    assert "at most 100000 characters" in store.dead_letters.open_dead_letters("demo")[0]["error"]


def test_source_can_ask_for_a_longer_incremental_look_back(store, settings):
    class LateLists(DemoCrawler):
        min_overlap_days = 45

    run(store, [item(1, date="2024-05-30")], settings)
    crawler = LateLists(store, items=[item(2, date="2024-04-20")], settings=settings)
    result = crawler.run()
    assert crawler.since == dt.date(2024, 4, 15)
    assert result.counts.new == 1 and result.counts.out_of_range == 0


def test_progress_is_reported_per_fetched_item(store, settings):
    seen = []
    DemoCrawler(store, items=[item(1), item(2), item(3)], settings=settings,
                progress=lambda done, total: seen.append((done, total))).run()
    assert seen == [(1, None), (2, None), (3, None)]


def test_progress_bar_counts_on_a_terminal_stream():
    import io

    from basecrawler.operations.progress import ProgressBar
    stream = io.StringIO()
    bar = ProgressBar("us fetched", stream=stream, unit="items")
    bar(5)
    bar(10, 10)
    bar.close()
    assert "us fetched: 5 items" in stream.getvalue() and "10/10 items" in stream.getvalue()


def test_blank_value_inside_extra_never_erases_a_stored_one(store):
    first = Recall(country="XX", recall_number="E1", recall_date="2024-01-01", extra={"risk": "serious", "lot": "A"})
    store.upsert("vehicle_recall", [first], source="demo")
    again = Recall(country="XX", recall_number="E1", recall_date="2024-01-01", extra={"risk": "", "lot": None, "new": 1})
    result = store.upsert("vehicle_recall", [again], source="demo")
    assert result.updated == 1
    assert store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "E1"})["extra"] == {"risk": "serious", "lot": "A", "new": 1}
