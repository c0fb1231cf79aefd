"""A SQLite batch finishing behind the caller (store/finishing.py): `upsert(…, behind=True)`
returns once the rows are written and leaves the full-text feed and the COMMIT to a background
thread. Stored data, search and counts are the ones the waited-for write gives; nothing else
ever runs on the connection meanwhile; lookups meanwhile never see rows about to change; a batch
whose finishing fails is rolled back whole and its failure raised, and a run counts only what
was stored."""
from __future__ import annotations

import sqlite3
import threading

import pytest

from basecrawler import Recall, Store
from basecrawler.recordtypes.registry import get_record_type
from basecrawler.recordtypes.tables import fts_table
from basecrawler.store import finishing
from basecrawler.testing import fast_settings
from support import ItemsCrawler

VEHICLE = get_record_type("vehicle_recall")


def recall(number: str, **fields) -> Recall:
    return Recall(**{"country": "US", "recall_number": number, "recall_date": "2024-03-01",
                     "summary_original": f"Brake hose {number} may leak", **fields})


BATCHES = [
    [recall(f"24V{n:03d}") for n in range(40)],
    # changed originals (the Korean text is cleared), unchanged ones, a key twice, new ones
    [recall("24V001", summary_original="Brake hose may crack"), recall("24V002"), recall("24V003", remedy_original="Fix"),
     recall("24V003", model_original="F-150"), *[recall(f"24V{n:03d}") for n in range(40, 60)]],
    [recall("24V050", summary_original="Steering column may separate"), recall("24V061")],
]


def stored(store: Store) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in ("first_seen_at", "updated_at")}
            for row in store.query("SELECT * FROM recalls ORDER BY id")]


def indexed(store: Store) -> list[tuple]:
    fts = fts_table(VEHICLE)
    return [tuple(row.values()) for row in store.query(f"SELECT rowid, * FROM [{fts}] ORDER BY rowid")]


@pytest.fixture
def held(monkeypatch):
    """Batches finishing behind wait for `held.set()` before their statements run."""
    gate = threading.Event()
    real = finishing._finish

    def waiting(conn, statements, *rest):
        assert gate.wait(10), "the test never let the batch finish"
        real(conn, statements, *rest)
    monkeypatch.setattr(finishing, "_finish", waiting)
    yield gate
    gate.set()


def test_a_batch_finished_behind_stores_and_indexes_what_a_waited_one_does(tmp_path):
    waited, behind = Store(tmp_path / "waited.db"), Store(tmp_path / "behind.db")
    for batch in BATCHES:
        one = waited.upsert(VEHICLE, batch, source="us")
        other = behind.upsert(VEHICLE, batch, source="us", behind=True)
        assert one.finishing is None and other.finishing is not None
        assert (other.new, other.updated, other.unchanged, other.merged, other.by_key) == \
            (one.new, one.updated, one.unchanged, one.merged, one.by_key)
    assert stored(behind) == stored(waited)
    assert indexed(behind) == indexed(waited) and len(indexed(behind)) == 61
    fts = fts_table(VEHICLE)
    assert [r["rowid"] for r in behind.query(f"SELECT rowid FROM [{fts}] WHERE [{fts}] MATCH 'Steering'")] == \
        [r["rowid"] for r in waited.query(f"SELECT rowid FROM [{fts}] WHERE [{fts}] MATCH 'Steering'")] != []


def test_nothing_else_runs_on_the_connection_until_the_batch_is_committed(tmp_path, held):
    store = Store(tmp_path / "s.db")
    result = store.upsert(VEHICLE, BATCHES[0], source="us", behind=True)
    assert not result.finishing.done()   # held: the upsert returned before its commit
    seen = {}

    def read():
        seen["rows"] = store.query("SELECT COUNT(*) AS n FROM recalls")[0]["n"]
        seen["committed"] = result.finishing.done()
    reader = threading.Thread(target=read)
    reader.start()
    reader.join(0.3)
    assert reader.is_alive()   # waiting for the batch, not reading inside its transaction
    held.set()
    reader.join(10)
    assert seen == {"rows": 40, "committed": True}
    other = sqlite3.connect(tmp_path / "s.db")   # and it is in the file for anyone
    assert other.execute("SELECT COUNT(*) FROM recalls").fetchone()[0] == 40


def test_lookups_meanwhile_read_the_committed_file_less_the_keys_the_batch_is_changing(tmp_path, held):
    store = Store(tmp_path / "s.db")
    held.set()
    store.upsert(VEHICLE, BATCHES[0], source="us", behind=True)
    store.settle()
    held.clear()
    result = store.upsert(VEHICLE, [recall("24V001", summary_original="Brake hose may crack"), recall("24V099")],
                          source="us", behind=True)
    known = store.lookup.known_inputs(VEHICLE, [("us", "US", "24V001"), ("us", "US", "24V002"), ("us", "US", "24V099")])
    assert not result.finishing.done()   # answered without waiting for the batch
    # 24V002 as committed; 24V001 (being updated) and 24V099 (being inserted) left out: their
    # records go the whole way and the store sees them after the batch.
    assert list(known) == [("us", "US", "24V002")]
    held.set()
    store.settle()
    assert set(store.lookup.known_inputs(VEHICLE, [("us", "US", "24V001"), ("us", "US", "24V099")])) == \
        {("us", "US", "24V001"), ("us", "US", "24V099")}


def test_a_batch_whose_finishing_fails_is_rolled_back_whole_and_its_failure_raised_once(tmp_path):
    store = Store(tmp_path / "s.db")
    store.upsert(VEHICLE, BATCHES[0], source="us", behind=True)
    store.records.fts_feeds[VEHICLE.table] = "INSERT INTO no_such_index VALUES (?)"   # the feed will fail
    result = store.upsert(VEHICLE, BATCHES[1], source="us", behind=True)
    assert isinstance(result.finishing.exception(10), sqlite3.OperationalError)
    with pytest.raises(sqlite3.OperationalError, match="no_such_index"):
        store.query("SELECT 1")
    store.records.fts_feeds.clear()
    rows = stored(store)   # raised once; the store goes on, holding the first batch only
    assert len(rows) == 40 and rows[1]["summary_original"] == "Brake hose 24V001 may leak"
    assert store.upsert(VEHICLE, BATCHES[1], source="us", behind=True).new == 20
    store.settle()
    assert len(indexed(store)) == 60


class ListCrawler(ItemsCrawler):
    source = "tst"
    country = "US"

    def parse(self, raw):
        return raw


def test_a_run_whose_batch_is_lost_while_finishing_fails_and_counts_only_what_was_stored(db_path, monkeypatch):
    store = Store(db_path)
    items = [{"recall_number": f"24V{n:03d}", "recall_date": "2024-03-01", "summary_original": "Brake hose"}
             for n in range(30)]
    real_upsert, calls = store.upsert, []

    def second_batch_fails_finishing(*args, **kwargs):
        calls.append(kwargs.get("behind"))
        if len(calls) == 2:
            store.records.fts_feeds[VEHICLE.table] = "INSERT INTO no_such_index VALUES (?)"
        return real_upsert(*args, **kwargs)
    monkeypatch.setattr(store, "upsert", second_batch_fails_finishing)
    result = ListCrawler(store, items=items, mode="full", settings=fast_settings(db_path, batch_size=10)).run()
    assert calls[:2] == [True, True]   # the pipeline stores behind
    assert result.status == "failed" and "no_such_index" in result.error
    store.records.fts_feeds.clear()
    kept = store.lookup.count("vehicle_recall")
    assert kept == 10
    assert (result.counts.saved, result.counts.new) == (kept, kept)   # the lost batch is not counted
    run = store.query("SELECT status, saved FROM crawl_runs WHERE id = ?", [result.run_id])[0]
    assert run == {"status": "failed", "saved": kept}


def test_a_commit_that_meets_a_lock_is_asked_again_with_the_batch_still_open(monkeypatch):
    monkeypatch.setattr(finishing, "COMMIT_RETRY_BASE_WAIT_S", 0)
    asked = []

    class LockedOnce:   # the connection a held write lock elsewhere makes COMMIT wait on
        in_transaction = True

        def execute(self, sql, params=()):
            asked.append(sql)
            if sql == "COMMIT" and asked.count("COMMIT") == 1:
                raise sqlite3.OperationalError("database is locked")
            if sql == "COMMIT":
                self.in_transaction = False
    conn = LockedOnce()
    finishing._finish(conn, [("INSERT INTO fts SELECT 1", [])])
    assert asked == ["INSERT INTO fts SELECT 1", "COMMIT", "COMMIT"] and not conn.in_transaction


def test_lookups_meanwhile_read_the_file_opened_wherever_the_working_directory_went(tmp_path, held, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = Store("relative.db")
    held.set()
    store.upsert(VEHICLE, BATCHES[0], source="us", behind=True)
    store.settle()
    held.clear()
    store.upsert(VEHICLE, [recall("24V099")], source="us", behind=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert list(store.lookup.known_inputs(VEHICLE, [("us", "US", "24V002")])) == [("us", "US", "24V002")]
    assert not (elsewhere / "relative.db").exists()
    held.set()


def test_committed_batches_reach_the_database_file_through_the_checkpointer_not_the_writers_commit(tmp_path, monkeypatch):
    monkeypatch.setattr(finishing, "WRITER_CHECKPOINT_PAGES", 10**9)   # the writer never checkpoints
    store = Store(tmp_path / "s.db")
    for batch in BATCHES:
        store.upsert(VEHICLE, batch, source="us", behind=True)
    store.settle()
    store.finisher.wait_checkpointed()
    assert store.db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 10**9
    # The database file alone (without its WAL) holds every committed batch: copied by the
    # checkpointer's own connection, on its own thread.
    alone = tmp_path / "alone.db"
    alone.write_bytes((tmp_path / "s.db").read_bytes())
    assert sqlite3.connect(alone).execute("SELECT COUNT(*) FROM recalls").fetchone()[0] == 61
