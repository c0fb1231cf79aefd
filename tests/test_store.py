"""The store beyond the pipeline: migrations of old databases, concurrent processes."""
import datetime as dt
import sqlite3
import subprocess
import sys
import textwrap
import time

from basecrawler import Recall, Store

OLD_SCHEMA = """
CREATE TABLE recalls (
    id INTEGER PRIMARY KEY, source TEXT, country TEXT, recall_number TEXT, recall_date TEXT,
    manufacturer_original TEXT, model_original TEXT, summary_original TEXT, affected_units INTEGER,
    updated_at TEXT
);
"""


def test_old_database_with_duplicates_is_merged_then_indexed(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(OLD_SCHEMA)
    conn.executemany(
        "INSERT INTO recalls (source, country, recall_number, recall_date, manufacturer_original, model_original, "
        "summary_original, affected_units, updated_at) VALUES (?,?,?,?,?,?,?,?,?)",
        [
            ("us", "US", "24V001", "2024-01-01", "Ford", None, "old summary", 10, "2024-01-01T00:00:00+00:00"),
            ("us", "US", "24V001", "2024-01-01", None, "F-150", "new summary", None, "2024-02-01T00:00:00+00:00"),
            ("us", "US", "24V002", "2024-01-03", "GM", "Bolt", None, 5, "2024-01-03T00:00:00+00:00"),
        ],
    )
    conn.commit()
    conn.close()

    store = Store(path)
    rows = store.query("SELECT * FROM recalls ORDER BY recall_number")
    assert len(rows) == 2
    merged = rows[0]
    assert (merged["manufacturer_original"], merged["model_original"], merged["summary_original"],
            merged["affected_units"]) == ("Ford", "F-150", "new summary", 10)
    assert rows[1]["model_original"] == "Bolt"
    # The unique key now holds, so upserts work on the migrated database.
    result = store.upsert("vehicle_recall", [Recall(country="US", recall_number="24V001", recall_date="2024-01-01",
                                          remedy_original="Replace")], source="us")
    assert (result.new, result.updated) == (0, 1)
    assert store.lookup.count("vehicle_recall") == 2


def test_schema_is_versioned(store):
    from basecrawler.store.schema import MIGRATIONS
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_the_store_connection_keeps_a_page_cache_larger_than_sqlites_default(store):
    """A batch touches leaf pages all over each secondary index; SQLite's default cache
    (2,000 KiB) evicts them between statements and every batch reads them back."""
    from basecrawler.store.core import PAGE_CACHE_KIB
    assert PAGE_CACHE_KIB > 2_000
    assert store.db.execute("PRAGMA cache_size").fetchone()[0] == -PAGE_CACHE_KIB


CRAWLER_SCRIPT = textwrap.dedent("""
    import logging, sys, time
    from basecrawler import BaseCrawler
    logging.basicConfig(level=logging.INFO)
    from basecrawler.testing import fast_settings

    class SlowCrawler(BaseCrawler):
        source = "slow"
        country = "SL"
        endpoints = {}

        def fetch(self):
            for n in range(300):
                if n == 100 and sys.argv[2] == "first":
                    # Hold the lock (mid-run, a batch stored) until the second process waits for
                    # it: a fixed sleep lost the race when its start-up took seconds on a busy machine.
                    deadline = time.monotonic() + 60
                    while time.monotonic() < deadline and not self.store.query(
                            "SELECT 1 FROM crawl_runs WHERE status = 'waiting'"):
                        time.sleep(0.05)
                yield n

        def parse(self, raw):
            return {"recall_number": f"S{raw}", "recall_date": "2024-01-01", "summary_original": sys.argv[2]}

    result = SlowCrawler(sys.argv[1], settings=fast_settings(sys.argv[1], batch_size=50), mode="full").run()
    print(result.status)
""")


def test_two_processes_at_once_second_waits_no_lock_errors_no_duplicates(tmp_path):
    db = str(tmp_path / "shared.db")
    script = tmp_path / "crawl.py"
    script.write_text(CRAWLER_SCRIPT)
    first = subprocess.Popen([sys.executable, str(script), db, "first"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = time.monotonic() + 30
    while time.monotonic() < started:   # the second starts once the first holds the lock (its run row is there)
        try:
            with sqlite3.connect(db, timeout=30) as conn:
                if conn.execute("SELECT 1 FROM crawl_runs WHERE status = 'running'").fetchall():
                    break
        except sqlite3.OperationalError:
            pass   # no tables yet
        time.sleep(0.05)
    second = subprocess.Popen([sys.executable, str(script), db, "second"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen_waiting = False
    deadline = time.monotonic() + 30
    while first.poll() is None and time.monotonic() < deadline:
        conn = sqlite3.connect(db, timeout=30)
        try:
            seen_waiting |= bool(conn.execute("SELECT 1 FROM crawl_runs WHERE status = 'waiting'").fetchall())
        except sqlite3.OperationalError:
            pass  # the first process has not created its tables yet
        finally:
            conn.close()
        time.sleep(0.05)
    out1, err1 = first.communicate(60)
    out2, err2 = second.communicate(60)
    assert out1.strip() == "succeeded" and out2.strip() == "succeeded", (err1, err2)
    assert "database is locked" not in err1 + err2
    store = Store(db)
    assert store.lookup.count("vehicle_recall") == 300
    assert store.db.execute("SELECT COUNT(DISTINCT recall_number) FROM recalls").fetchone()[0] == 300
    runs = store.query("SELECT status, started_at FROM crawl_runs ORDER BY id")
    assert [r["status"] for r in runs] == ["succeeded", "succeeded"]
    assert seen_waiting and "waiting for the run lock" in err2
    assert store.query("SELECT summary_original FROM recalls LIMIT 1")[0]["summary_original"] == "second"


def test_lock_of_a_killed_process_is_taken_over(tmp_path):
    db = str(tmp_path / "k.db")
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from basecrawler.pipeline.runlock import RunLock
        lock = RunLock({db!r}); lock.acquire(); print("held", flush=True); time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    from basecrawler.pipeline.runlock import RunLock
    lock = RunLock(db)
    assert not lock.try_acquire()
    holder.kill()
    holder.wait()
    assert lock.try_acquire()
    lock.release()


def test_run_lock_timeout_is_a_failed_run_not_a_stuck_waiting_row(tmp_path):
    from basecrawler.pipeline.runlock import RunLock
    from basecrawler.testing import fast_settings
    from tests.test_pipeline import DemoCrawler, item

    db = str(tmp_path / "t.db")
    holder = RunLock(db)
    assert holder.try_acquire()
    try:
        store = Store(db)
        result = DemoCrawler(store, items=[item(1)], settings=fast_settings(db, lock_timeout_s=0.3)).run()
    finally:
        holder.release()
    assert result.status == "failed" and "still held" in result.error
    assert [r["status"] for r in store.query("SELECT status FROM crawl_runs")] == ["failed"]


# ---- the full-text index fed per batch (issue #15.8) -------------------------------------------
def _fts_consistent(store) -> bool:
    """FTS5's own check that the external-content index holds exactly the table's text."""
    try:
        store.db.conn.execute("INSERT INTO recalls_fts(recalls_fts, rank) VALUES ('integrity-check', 1)")
    except sqlite3.DatabaseError:
        return False
    return True


def _matches(store, term: str) -> list[str]:
    return [r["recall_number"] for r in store.query(
        "SELECT recall_number FROM recalls WHERE id IN (SELECT rowid FROM recalls_fts WHERE recalls_fts MATCH ?) "
        "ORDER BY recall_number", [f'"{term}"'])]


def test_new_rows_reach_the_index_without_an_insert_trigger(store):
    triggers = {r["name"] for r in store.query("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                               "AND tbl_name = 'recalls'")}
    assert triggers == {"recalls_fts_au", "recalls_fts_ad"}
    store.upsert("vehicle_recall", [Recall(country="US", recall_number="24V001", recall_date="2024-01-01",
                                 summary_original="Brake hose may rupture"),
                          Recall(country="JP", recall_number="JP-1", recall_date="2024-01-02", source_lang="ja",
                                 summary_original="燃料ポンプが停止するおそれ")], source="t")
    assert _matches(store, "hose") == ["24V001"] and _matches(store, "燃料ポ") == ["JP-1"]
    # A changed original goes through the update trigger; a second batch appends after the first.
    store.upsert("vehicle_recall", [Recall(country="US", recall_number="24V001", recall_date="2024-01-01",
                                 summary_original="Fuel pump may fail"),
                          Recall(country="CA", recall_number="2024-9", recall_date="2024-01-03",
                                 summary_original="Brake fluid leak")], source="t")
    assert _matches(store, "hose") == [] and _matches(store, "pump") == ["24V001"]
    assert _matches(store, "brake") == ["2024-9"]
    assert _fts_consistent(store)


def test_rows_refused_by_the_database_are_not_indexed(store):
    result = store.upsert("vehicle_recall", [Recall(country="US", recall_number="A1", recall_date="2024-01-01",
                                          summary_original="kept airbag row"),
                                   # Past the model (which keeps such a count out, #13.6), straight to
                                   # the database: an integer SQLite cannot hold.
                                   Recall.model_construct(country="US", recall_number="A2",
                                                          recall_date=dt.date(2024, 1, 1), source_lang="en",
                                                          summary_original="refused airbag row",
                                                          affected_units=2 ** 70)],
                                  source="t")
    assert (result.new, len(result.failed)) == (1, 1)
    assert _matches(store, "airbag") == ["A1"] and _fts_consistent(store)


def test_a_database_still_fed_by_the_insert_trigger_is_not_indexed_twice(tmp_path):
    from basecrawler.recordtypes import get_record_type
    FTS_COLUMNS = get_record_type("vehicle_recall").text_index_columns
    Store(tmp_path / "t.db").close()
    conn = sqlite3.connect(tmp_path / "t.db")
    cols = ", ".join(FTS_COLUMNS)
    conn.execute(f"CREATE TRIGGER recalls_fts_ai AFTER INSERT ON recalls BEGIN "
                 f"INSERT INTO recalls_fts(rowid, {cols}) VALUES (new.id, {', '.join('new.' + c for c in FTS_COLUMNS)}); END")
    conn.commit()
    conn.close()
    store = Store(tmp_path / "t.db")
    store.upsert("vehicle_recall", [Recall(country="US", recall_number="B1", recall_date="2024-01-01",
                                 summary_original="seat belt latch")], source="t")
    assert _matches(store, "latch") == ["B1"] and _fts_consistent(store)


# ---- schema extensions (issue #15.4) -------------------------------------------------------
def test_an_old_database_that_already_has_the_memory_table_migrates_and_keeps_it(tmp_path):
    """A database made before the translate package owned the table: `_m001_core` created it and
    there is no extension bookkeeping yet. The extension's CREATE … IF NOT EXISTS leaves it be."""
    path = tmp_path / "old.db"
    store = Store(path)
    store.db.executescript(
        "DROP TABLE schema_extensions;"
        "INSERT INTO translation_memory VALUES ('ja', 'ko', 'h', '制動', '제동', 'fake', '2024-01-01', 3);")
    store.close()

    store = Store(path)
    assert store.query("SELECT source_text, translated_text, uses FROM translation_memory") == \
        [{"source_text": "制動", "translated_text": "제동", "uses": 3}]
    from translate.schema import MIGRATIONS as TRANSLATE_MIGRATIONS
    assert store.scalar("SELECT version FROM schema_extensions WHERE name = 'translate'") == len(TRANSLATE_MIGRATIONS)
    store.close()


def test_without_the_translate_package_the_store_works_and_has_no_memory_table(tmp_path, monkeypatch):
    from basecrawler.store import schema
    from basecrawler.store.engines.transfer import copy_store
    monkeypatch.setattr(schema, "_installed_extensions", lambda: {})   # no entry point installed
    store = Store(tmp_path / "bare.db")
    assert "translation_memory" not in store.db.table_names()
    assert "schema_extensions" not in store.db.table_names()
    result = store.upsert("vehicle_recall", [Recall(country="US", recall_number="24V001", recall_date="2024-01-01",
                                          remedy_original="Replace")], source="us")
    assert result.new == 1
    assert "translation_memory" not in schema.reference_schema()
    target = Store(tmp_path / "copy.db")
    copied = copy_store(store, target)["recalls"]
    assert (copied.source_rows, copied.target_rows, copied.ok) == (1, 1, True)
    store.close()
    target.close()


def test_a_schema_extension_that_fails_to_load_is_left_out(tmp_path, monkeypatch, caplog):
    import importlib.metadata
    from basecrawler.store import schema

    broken = importlib.metadata.EntryPoint("broken", "no_such_module_xyz:MIGRATIONS", schema.SCHEMA_ENTRY_POINTS)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None, **_: [broken])
    schema._installed_extensions.cache_clear()
    try:
        store = Store(tmp_path / "x.db")
        assert "schema extension broken could not be loaded" in caplog.text
        assert store.lookup.count("vehicle_recall") == 0
        store.close()
    finally:
        monkeypatch.undo()
        schema._installed_extensions.cache_clear()


def _statements(store) -> list[str]:
    seen: list[str] = []
    store.db.conn.set_trace_callback(seen.append)
    return seen


def test_new_rows_go_by_plain_insert_and_changed_ones_by_an_update_of_the_merged_row_without_a_savepoint(tmp_path):
    store = Store(tmp_path / "t.db")
    store.upsert("vehicle_recall", [Recall(country="US", recall_number=f"P{n}", recall_date="2024-01-01", summary_original="s")
                          for n in range(3)], source="t")
    ids = {row["recall_number"]: row["id"] for row in store.query("SELECT id, recall_number FROM recalls")}
    seen = _statements(store)
    result = store.upsert("vehicle_recall", [Recall(country="US", recall_number=f"P{n}", recall_date="2024-01-01",
                                          summary_original="changed" if n < 2 else "s") for n in range(5)], source="t")
    assert (result.new, result.updated, result.unchanged) == (2, 2, 1)
    # The trace shows each row's statement with its values (the update trigger traces it again).
    writes = [s for s in seen if s.startswith('INSERT INTO "recalls"')]
    inserted = {n for n in ("P0", "P1", "P2", "P3", "P4") for s in writes if f"'{n}'" in s}
    assert inserted == {"P3", "P4"} and not any("ON CONFLICT" in s for s in writes)
    updates = [s for s in seen if s.startswith('UPDATE "recalls" SET')]
    assert {int(s.rsplit("=", 1)[1]) for s in updates} == {ids["P0"], ids["P1"]}
    assert not any(s.startswith("SAVEPOINT") for s in seen)


def test_a_refused_changed_row_among_new_ones_fails_alone_and_the_rest_is_written_once(tmp_path):
    store = Store(tmp_path / "t.db")
    store.upsert("vehicle_recall", [Recall(country="US", recall_number=f"Q{n}", recall_date="2024-01-01", summary_original="old")
                          for n in range(4)], source="t")
    store.db.execute("CREATE TRIGGER refuse_q2 BEFORE UPDATE ON recalls WHEN new.recall_number = 'Q2' "
                     "BEGIN SELECT RAISE(ABORT, 'refuse_q2'); END")
    seen = _statements(store)
    result = store.upsert("vehicle_recall", [Recall(country="US", recall_number=f"Q{n}", recall_date="2024-01-01",
                                          summary_original="new") for n in range(8)], source="t")
    assert (result.new, result.updated, len(result.failed)) == (4, 3, 1)
    assert "refuse_q2" in result.failed[0][1] and result.failed[0][0]["recall_number"] == "Q2"
    assert any(s.startswith("SAVEPOINT") for s in seen)   # the second attempt, bisected
    rows = {r["recall_number"]: r["summary_original"] for r in store.query("SELECT recall_number, summary_original FROM recalls")}
    assert rows == {**{f"Q{n}": "new" for n in range(8)}, "Q2": "old"}
    assert _matches(store, "new") == sorted(f"Q{n}" for n in range(8) if n != 2) and _fts_consistent(store)


def test_the_lookup_by_input_reads_only_its_covering_index(tmp_path):
    from basecrawler.recordtypes import record_types

    store = Store(tmp_path / "t.db")
    for record_type in record_types().values():
        seen = _statements(store)
        store.lookup.known_inputs(record_type, [("t", *(["x"] * (len(record_type.key_columns) - 1)))])
        store.db.conn.set_trace_callback(None)
        lookup = next(s for s in seen if s.startswith("SELECT"))
        plan = " ".join(str(row[-1]) for row in store.db.conn.execute(f"EXPLAIN QUERY PLAN {lookup}"))
        assert f"COVERING INDEX idx_{record_type.table}_inputs" in plan, (record_type.name, plan)


def test_a_store_without_the_input_index_gets_it_when_opened(tmp_path):
    Store(tmp_path / "t.db").close()
    conn = sqlite3.connect(tmp_path / "t.db")
    conn.execute("DROP INDEX idx_recalls_inputs")
    conn.commit()
    conn.close()
    store = Store(tmp_path / "t.db")
    assert "idx_recalls_inputs" in {row[1] for row in store.db.conn.execute("PRAGMA index_list(recalls)")}


def test_known_inputs_gives_each_stored_key_found_its_hash_and_date_the_date_only_when_asked(tmp_path):
    store = Store(tmp_path / "t.db")
    store.upsert("vehicle_recall", [Recall(country="US", recall_number=n, recall_date="2024-01-02", summary_original="s")
                          for n in ("7", "42")], source="t")
    store.upsert("vehicle_recall", [Recall(country="US", recall_number="7", summary_original="s")], source="1")
    hashes = {(r["source"], r["recall_number"]): r["input_hash"] for r in store.query("SELECT * FROM recalls")}
    asked = [("t", "US", "7"), ("t", "US", 42), ("t", "US", "9"), ("u", "US", "7"), (1, "US", "7")]
    found = store.lookup.known_inputs("vehicle_recall", asked)
    # Under the stored key: a number asked for text is found as its digits, as a row's key says.
    assert found == {("t", "US", "7"): (hashes["t", "7"], "2024-01-02"), ("t", "US", "42"): (hashes["t", "42"], "2024-01-02"),
                     ("1", "US", "7"): (hashes["1", "7"], "1970-01-01")}   # (an unknown date's stored sentinel)
    seen = _statements(store)
    undated = store.lookup.known_inputs("vehicle_recall", asked, dates=False)
    assert undated == {key: (input_hash, None) for key, (input_hash, _) in found.items()}
    assert not any("recall_date" in statement for statement in seen)   # a run without a window reads no date
