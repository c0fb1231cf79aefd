"""An index the reading side gains on a table someone analysed gets its statistics when it is
made (recordtypes/tables.py): SQLite's planner weighed an index without them by a guess, and
took the new (country, number, source) index — which lacks the copy flag, so every row was
read for it — over the measured shown-records index for a grouped page's country count."""
import sqlite3

from basecrawler import Store
from basecrawler.recordtypes import get_record_type
from basecrawler.recordtypes.tables import facet_filter_index, index_name, read_indexes
from test_read_scale import _recalls

VEHICLE = get_record_type("vehicle_recall")


def _stats(db_path) -> set[str]:
    with sqlite3.connect(db_path) as conn:
        return {row[0] for row in conn.execute("SELECT idx FROM sqlite_stat1 WHERE tbl = 'recalls'")}


def _analysed_store(db_path) -> str:
    """A store of 200 recalls someone analysed; the name of its last read index."""
    store = Store(db_path)
    store.upsert("vehicle_recall", _recalls(200), source="test")
    store.close()
    with sqlite3.connect(db_path) as conn:
        conn.execute("ANALYZE")
    return index_name(VEHICLE, read_indexes(VEHICLE)[-1])


def test_an_index_added_to_an_analysed_table_is_analysed(db_path):
    added = _analysed_store(db_path)
    with sqlite3.connect(db_path) as conn:
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


def test_a_store_whose_index_came_without_statistics_is_measured_once_migrated(db_path):
    """(A store of wave 11: the shared-number index made after someone analysed the table.)"""
    unmeasured = _analysed_store(db_path)
    with sqlite3.connect(db_path) as conn:
        conn.execute("DELETE FROM sqlite_stat1 WHERE idx = ?", [unmeasured])
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        conn.execute(f"PRAGMA user_version = {version - 1}")
    Store(db_path).close()
    assert unmeasured in _stats(db_path)


def test_a_run_that_filled_a_table_leaves_the_planner_statistics(db_path):
    """After `run` stores records, SQLite knows how many records a value holds: a common
    country's newest page is read along the date index, not sorted out of all its records."""
    from basecrawler.pipeline.runner import keep_statistics
    from basecrawler.recordtypes.statistics import STATISTICS_MIN_ROWS

    store = Store(db_path)
    store.upsert("vehicle_recall", _recalls(STATISTICS_MIN_ROWS * 3), source="test")   # a third JP
    keep_statistics(store)
    store.close()
    assert index_name(VEHICLE, facet_filter_index(VEHICLE, "country")) in _stats(db_path)
    with sqlite3.connect(db_path) as conn:
        plan = " ".join(row[-1] for row in conn.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM recalls WHERE country = 'JP' ORDER BY recall_date DESC LIMIT 51"))
    assert "TEMP B-TREE" not in plan, plan
