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


MB = 1024 * 1024
_held: list[sqlite3.Connection] = []   # what earlier tests on the worker left holding memory


def _fill(conn: sqlite3.Connection, megabytes: int) -> None:
    conn.execute("CREATE TABLE t(x)")
    conn.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
                  "INSERT INTO t SELECT randomblob(1024) FROM n", [megabytes * 1024])


def test_a_worker_holds_sqlite_memory_an_earlier_test_left():
    conn = sqlite3.connect(":memory:")
    _fill(conn, 120)
    _held.append(conn)


def test_an_in_process_web_view_counts_its_ceiling_from_what_the_worker_holds():
    """Its ceiling is the web view's own on top of what the worker holds, as in the server's
    process, which starts from nothing: with 120 MB held and 160 MB the ceiling, the web view's
    next 60 MB failed with MemoryError."""
    conn = sqlite3.connect(":memory:")
    limits.harden(conn)
    try:
        _fill(conn, 60)
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 60 * 1024
    finally:
        conn.close()
        for held in _held:
            held.close()
