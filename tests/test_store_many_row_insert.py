"""New SQLite rows many to a statement (basecrawler/store/records.py `_insert_at_once`, issue #35
item 8): a batch's rows are stored exactly as one INSERT per row would store them, in a handful
of statements of fixed sizes, and a row SQLite refuses still fails alone (the batch is then
written again, bisected). The many-row statement keeps no statement journal (SQLite's OR FAIL:
the store undoes a failure with the whole transaction), so it writes no more to disk than one
INSERT a row would."""
import os

import pytest

from basecrawler import Store
from basecrawler.store.records import FEWEST_ROWS_PER_INSERT, ROWS_PER_INSERT
from support import numbered_recall, refuse_recall_number

TYPE = "vehicle_recall"
# Past one full statement, through the halving sizes, and a last few rows by executemany.
COUNT = ROWS_PER_INSERT + 64 + FEWEST_ROWS_PER_INSERT + 3


def _inserts(store: Store) -> list[str]:
    seen: list[str] = []
    store.db.conn.set_trace_callback(
        lambda sql: seen.append(sql) if sql.lstrip().upper().startswith("INSERT") else None)
    return seen


def _stored(path) -> list[tuple]:
    store = Store(str(path))
    try:
        return [tuple(row) for row in store.db.conn.execute(
            "SELECT * FROM recalls ORDER BY id").fetchall()]
    finally:
        store.close()


def test_a_batch_goes_in_few_statements_and_stores_what_one_insert_a_row_would(tmp_path, monkeypatch):
    records = [numbered_recall(n, affected_units=n, extra={"n": str(n)} if n % 2 else {}) for n in range(COUNT)]
    store = Store(str(tmp_path / "many.db"))
    try:
        inserts = _inserts(store)
        result = store.upsert(TYPE, records, source="us")
        assert (result.new, result.failed) == (COUNT, [])
        table_inserts = [sql for sql in inserts if '"recalls"' in sql.split("(")[0]]
        # 512 + 64 + 16 in three statements, the last 3 rows one statement each.
        assert len(table_inserts) == 3 + 3, len(table_inserts)
    finally:
        store.close()
    # The same records one INSERT a row (the statement `_write_at_once` runs).
    from basecrawler.store import records as records_module
    monkeypatch.setattr(records_module, "FEWEST_ROWS_PER_INSERT", COUNT + 1)
    single = Store(str(tmp_path / "single.db"))
    try:
        assert single.upsert(TYPE, records, source="us").new == COUNT
    finally:
        single.close()
    many, one = _stored(tmp_path / "many.db"), _stored(tmp_path / "single.db")
    times = {i for i, name in enumerate(_columns(tmp_path / "many.db")) if name in ("first_seen_at", "updated_at")}
    assert [tuple(v for i, v in enumerate(row) if i not in times) for row in many] == \
           [tuple(v for i, v in enumerate(row) if i not in times) for row in one]


def _columns(path) -> list[str]:
    store = Store(str(path))
    try:
        return [row[1] for row in store.db.conn.execute("PRAGMA table_info(recalls)").fetchall()]
    finally:
        store.close()


def test_a_row_refused_inside_a_many_row_statement_fails_alone(tmp_path):
    store = Store(str(tmp_path / "s.db"))
    try:
        refuse_recall_number(store, "R0077")
        result = store.upsert(TYPE, [numbered_recall(n) for n in range(COUNT)], source="us")
        assert (result.new, len(result.failed)) == (COUNT - 1, 1)
        assert result.failed[0][0]["recall_number"] == "R0077"
        assert store.lookup.count(TYPE) == COUNT - 1
        # The full-text index holds every stored row once.
        assert store.db.conn.execute("SELECT COUNT(*) FROM recalls_fts").fetchone()[0] == COUNT - 1
    finally:
        store.close()


def test_a_row_refused_by_a_constraint_mid_statement_fails_alone(tmp_path):
    """OR FAIL stops the statement at the refused row and keeps the rows before it: the store
    must undo them with the transaction and write the batch again, bisected."""
    store = Store(str(tmp_path / "s.db"))
    try:
        store.write(lambda db: db.conn.execute("CREATE UNIQUE INDEX one_summary ON recalls(summary_original)"))
        records = [numbered_recall(n, summary_original="Summary 10" if n == 300 else f"Summary {n}")
                   for n in range(COUNT)]
        result = store.upsert(TYPE, records, source="us")
        assert (result.new, [row["recall_number"] for row, _ in result.failed]) == (COUNT - 1, ["R0300"])
        assert "UNIQUE" in result.failed[0][1]
        assert store.lookup.count(TYPE) == COUNT - 1
        assert store.db.conn.execute("SELECT COUNT(*) FROM recalls_fts").fetchone()[0] == COUNT - 1
        assert store.db.conn.execute("SELECT COUNT(*) FROM recalls WHERE recall_number = 'R0300'").fetchone()[0] == 0
    finally:
        store.close()


def _bytes_written() -> int:
    with open("/proc/self/io") as f:   # every write the process made, temporary files included
        return next(int(line.split()[1]) for line in f if line.startswith("wchar"))


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux's /proc/self/io")
def test_a_many_row_statement_writes_no_more_than_one_insert_a_row(tmp_path, monkeypatch):
    """A statement that changes pages the transaction changed before (the second batch meets
    the first's) would copy each of them to a statement journal, a temporary file, to undo
    itself alone; the store undoes a failure with the whole transaction, so it keeps none."""
    from basecrawler.store import records as records_module

    def second_batch_writes(path) -> int:
        store = Store(str(path))
        try:
            store.upsert(TYPE, [numbered_recall(n) for n in range(COUNT)], source="us")
            before = _bytes_written()
            assert store.upsert(TYPE, [numbered_recall(COUNT + n) for n in range(COUNT)], source="us").new == COUNT
            return _bytes_written() - before
        finally:
            store.close()
    many = second_batch_writes(tmp_path / "many.db")
    monkeypatch.setattr(records_module, "FEWEST_ROWS_PER_INSERT", COUNT + 1)   # one INSERT a row
    single = second_batch_writes(tmp_path / "single.db")
    assert many <= single * 1.03, (many, single)


@pytest.mark.parametrize("behind", [False, True])
def test_a_caller_wrong_about_unstored_keys_costs_no_data(tmp_path, behind):
    """`unstored=True` skips the batch's key lookup. Told wrongly (a key is stored), the unique
    index refuses the row and the batch goes again with the lookup: the stored row is merged,
    counted updated, never doubled, never a failure."""
    store = Store(str(tmp_path / "s.db"))
    try:
        assert store.upsert(TYPE, [numbered_recall(1, summary_original="first words")], source="us").new == 1
        records = [numbered_recall(n, summary_original="new words") for n in range(COUNT)]   # number 1 again
        result = store.upsert(TYPE, records, source="us", unstored=True, behind=behind)
        if result.finishing is not None:
            result.finishing.result()
        assert (result.new, result.updated, result.failed) == (COUNT - 1, 1, [])
        stored = store.db.conn.execute("SELECT COUNT(*), COUNT(DISTINCT recall_number) FROM recalls").fetchone()
        assert tuple(stored) == (COUNT, COUNT)
        assert store.db.conn.execute("SELECT summary_original FROM recalls WHERE recall_number = ?",
                                     [records[1].recall_number]).fetchone()[0] == "new words"
    finally:
        store.close()
