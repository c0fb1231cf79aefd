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
    assert conn.execute("PRAGMA hard_heap_limit").fetchone()[0] == limits.HEAP_LIMIT_BYTES


def test_the_next_test_has_no_ceiling():
    assert sqlite3.connect(":memory:").execute("PRAGMA hard_heap_limit").fetchone()[0] == 0
