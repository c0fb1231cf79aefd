"""A test that serves the web view in-process leaves no SQLite heap ceiling behind for the
tests after it on the same pytest worker (conftest.py `_no_heap_limit_left_behind`). The web
view sets the ceiling process-wide (web/limits.py `harden`); left in place, every later test's
SQLite memory counted against it and one worker failed every test after with MemoryError.
The two tests run in this order (one file stays on one worker)."""
import sqlite3

from basecrawler.reading.web import limits


def test_a_test_that_hardens_a_connection_sets_the_process_wide_ceiling():
    conn = sqlite3.connect(":memory:")
    limits.harden(conn)   # what every connection of an in-process Datasette gets
    conn.execute("PRAGMA hard_heap_limit = 1048576")   # (lower still: the next test must exceed it)
    assert conn.execute("PRAGMA hard_heap_limit").fetchone()[0] == 1048576


def test_the_next_test_has_no_ceiling():
    conn = sqlite3.connect(":memory:")
    assert conn.execute("PRAGMA hard_heap_limit").fetchone()[0] == 0
    conn.execute("PRAGMA cache_size = -8192")
    conn.execute("CREATE TABLE t (x)")   # 4 MB of rows in the page cache: over a 1 MB ceiling
    conn.executemany("INSERT INTO t VALUES (?)", (("x" * 1000,) for _ in range(4000)))
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 4000
