"""An index the reading side gains on a table someone analysed gets its statistics when it is
made (recordtypes/tables.py): SQLite's planner weighed an index without them by a guess, and
took the new (country, number, source) index — which lacks the copy flag, so every row was
read for it — over the measured shown-records index for a grouped page's country count."""
import sqlite3

from basecrawler import Store
from basecrawler.recordtypes import get_record_type
from basecrawler.recordtypes.tables import index_name, read_indexes
from test_read_scale import _recalls

VEHICLE = get_record_type("vehicle_recall")


def _stats(db_path) -> set[str]:
    with sqlite3.connect(db_path) as conn:
        return {row[0] for row in conn.execute("SELECT idx FROM sqlite_stat1 WHERE tbl = 'recalls'")}


def test_an_index_added_to_an_analysed_table_is_analysed(db_path):
    store = Store(db_path)
    store.upsert("vehicle_recall", _recalls(200), source="test")
    store.close()
    added = index_name(VEHICLE, read_indexes(VEHICLE)[-1])
    with sqlite3.connect(db_path) as conn:
        conn.execute("ANALYZE")
        conn.execute(f"DROP INDEX [{added}]")
        conn.execute("DELETE FROM sqlite_stat1 WHERE idx = ?", [added])
    assert added not in _stats(db_path)
    Store(db_path).close()   # a writer opens it: the index is made again
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", [added]).fetchone()
    assert added in _stats(db_path)


def test_a_table_nobody_analysed_is_left_without_statistics(db_path):
    store = Store(db_path)
    store.upsert("vehicle_recall", _recalls(50), source="test")
    store.close()
    with sqlite3.connect(db_path) as conn:
        assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat1'").fetchone()
