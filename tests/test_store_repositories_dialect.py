"""The store's repositories state their statements with the engine's dialect (issue #35 item 3):
every repository answers the same on both engines, and on PostgreSQL none of the store's
modules sends anything else (PostgreSQL refuses plain SQL, engines/pg.py)."""
from __future__ import annotations

import datetime as dt

import pytest

from basecrawler import Store
from translate.testing import seed

pytest.importorskip("psycopg")
from pgcluster import pg_cluster, pg_url  # noqa: E402,F401  (fixtures)

# The store modules whose statements are stated (records.py, groups*.py are converted apart).
STATED = {f"basecrawler.store.{name}" for name in (
    "core", "schema", "runs", "deadletters", "enrichment_queue", "migrations_early", "migrations", "ledger",
    "lookup", "finishing")}


def _exercise(store: Store) -> dict:
    """Every repository method of the modules above, once, and what they answered."""
    seen: dict = {}
    seed(store, 3)
    runs = store.runs
    run_id = runs.start_run("us", "full", "running", 2 ** 22 + 7, since="2024-01-01")
    runs.update_run(run_id, status="succeeded", finished_at="2024-02-01T00:00:00+00:00", skip_reasons={"a": 1})
    seen["runs"] = (runs.last_run("us")["status"], runs.last_successful_run("us")["finished_at"],
                    runs.sources_with_runs(), runs.run_problem_counts("us"))
    dead_run = runs.start_run("us", "full", "running", 2 ** 22 + 9)
    seen["dead"] = runs.close_dead_runs() == [dead_run]
    seen["session"] = runs.session_alive(runs.session())

    letters = store.dead_letters
    first = letters.add_dead_letter(source="us", run_id=run_id, stage="parse", kind="invalid", error="bad",
                                    raw={"x": 1}, record_key="R1")
    second = letters.add_dead_letter(source="us", run_id=run_id, stage="detail", kind="fetch", error="gone",
                                     raw="text", record_key="R2")
    letters.dead_letter_retried(first, error="still bad", at="2024-03-01")
    store.write(lambda db: letters.resolve_detail(db, "us", "R2", at="2024-03-02"))
    seen["letters"] = ([row["id"] for row in letters.open_dead_letters("us")], letters.count_open_dead_letters(),
                       letters.count_open_dead_letters("us"), letters.sources_with_open_dead_letters(),
                       [row["raw_preview"] for row in letters.list_dead_letters("us", include_resolved=True)])
    letters.dead_letter_retried(first, error=None, at="2024-03-03")
    seen["resolved"] = (letters.count_open_dead_letters(), second > first)

    ledger = store.ledger
    ledger.note("eu", "w1", url="https://example.test/1", listed_date="2024-01-01", data={"n": 1})
    ledger.note("eu", "w2", url=None, listed_date="2024-01-02", data=None)
    ledger.note("eu", "w1", url=None, listed_date=None, data=None)   # keeps what it had
    seen["failed"] = ledger.failed("eu", "w2", "timeout", max_attempts=1)
    seen["requeued"] = ledger.requeue_given_up("eu")
    seen["ledger_done"] = ledger.done("eu", ["w1"])
    seen["ledger"] = ([(row["key"], row["state"], row["data"]) for row in ledger.items("eu", ["listed", "done",
                                                                                          "failing"])],
                      ledger.counts("eu"))

    queue = store.enrichment
    seen["queued"] = queue.enqueue("us", [("US", "R1", "2024-01-01"), ("US", "R2", None)], state="pending",
                                   now="2024-01-01T00:00:00")
    queue.enqueue("us", [("US", "R2", "2024-01-05")], state="pending", now="2024-01-01T00:00:00")
    claimed = queue.claim("us", due=["pending"], claimed="claimed", now="2024-01-02T00:00:00", limit=1)
    seen["claimed"] = [item["record_key"] for item in claimed]
    queue.release(claimed[0]["id"], state="retry", due="2024-01-03T00:00:00", now="2024-01-02T00:00:00",
                  attempted=True, error="503")
    other = queue.claim("us", due=["pending"], claimed="claimed", now="2024-01-02T00:00:00", limit=5)
    seen["reclaimed"] = queue.reclaim("us", claimed="claimed", claimed_before="2024-01-09", retry="retry",
                                      pending="pending", now="2024-01-02T00:00:00")
    queue.settle("us", other[0], state="done", level=0, due=None, now="2024-01-04T00:00:00", attempted=True,
                 error=None, resolve_letters=True)
    seen["requeue"] = queue.requeue("us", state="retry", to="pending", now="2024-01-05T00:00:00")
    seen["queue"] = queue.counts("us")

    lookup = store.lookup
    row = lookup.get("vehicle_recall", {"country": "US", "recall_number": "US-0001"})
    seen["lookup"] = (lookup.count("vehicle_recall"), lookup.count("vehicle_recall", "us"), row["recall_date"],
                      lookup.newest_date("vehicle_recall", "us", dt.date(2025, 1, 1)),
                      lookup.same_as("vehicle_recall", row), lookup.translation_counts("us"),
                      lookup.translation_backlog())
    store.set_meta("k", "v1")
    store.set_meta("k", "v2")
    seen["meta"] = (store.get_meta("k"), store.get_meta("missing"))
    return seen


def test_the_repositories_answer_alike_on_both_engines_and_state_every_statement(tmp_path, pg_url):  # noqa: F811
    sqlite = Store(str(tmp_path / "a.db"))
    try:
        on_sqlite = _exercise(sqlite)
    finally:
        sqlite.close()
    store = Store(pg_url)   # migrate_pg (schema.py's reference schema, the migrations on SQLite)
    try:
        on_pg = _exercise(store)
        facts = store.server_facts()
        assert facts[2] is True and facts[1] >= 1
        assert set(store.search_indexes().values()) <= {"windows", "trgm", None}
        from basecrawler.store.migrations import refill_derived_columns
        assert refill_derived_columns(store.db.conn, "vehicle_recall") == 0   # PostgreSQL's step 9 runs it
    finally:
        store.close()
    assert on_pg == on_sqlite
    assert on_sqlite["letters"][0] == [1] and on_sqlite["ledger_done"] == 0 and on_sqlite["meta"] == ("v2", None)
    assert on_sqlite["queue"] == {"done": 1, "pending": 1}


def test_a_sqlite_store_opens_migrates_and_reopens_with_stated_statements(tmp_path):
    """The SQLite-only paths (PRAGMAs, migrations, type tables, the reference schema)."""
    from basecrawler.store.schema import reference_schema

    path = tmp_path / "b.db"
    Store(str(path)).close()
    store = Store(str(path))
    try:
        assert store.scalar("PRAGMA user_version") >= 13 and store.scalar("PRAGMA journal_mode") == "wal"
        assert store.scalar("PRAGMA foreign_keys") == 1
    finally:
        store.close()
    schema = reference_schema()
    assert {"crawl_runs", "dead_letters", "list_ledger", "enrichment", "meta"} <= set(schema)
    assert schema["list_ledger"]["pk"] == ["source", "key"]
