"""SQLite's planner statistics of a type's table (sqlite_stat1). Without them the planner takes
an equality's index as selective and sorts every match; with an index that has none beside
measured ones, it weighs that one by a guess. Made when a table's size moved
(`refresh_statistics`, after runs), when an analysed table gains an index (`analyse_indexes`,
recordtypes/tables.py), and once for indexes a store gained unmeasured (migration 14)."""
from __future__ import annotations

from basecrawler.store.engines.dialect import SQLITE

STATISTICS_MIN_ROWS = 1_000   # below this the planner's guesses cost nothing worth measuring
STATISTICS_DRIFT = 0.25       # measured again when the table grew or shrank by more than this


def _has_statistics(conn) -> bool:
    return conn.execute(SQLITE.query("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat1'")).fetchone() is not None


def index_names(conn, table: str) -> set[str]:
    return {row[0] for row in conn.execute(
        SQLITE.query("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?"), [table])}


def refresh_statistics(conn, table: str) -> bool:
    """Measure the table's indexes for SQLite's planner when it has none or its size moved far
    from the measured one (True: measured). Without statistics the planner takes an equality's
    index as selective and sorts every match: a common country's table page sorted 200,000
    records for 50, where walking the date index finds them in a few hundred. A whole ANALYZE
    (a sampled one, `analysis_limit`, misjudged how many records a value holds and kept the
    sorting plan), run only when the size moved, so rarely."""
    rows = conn.execute(SQLITE.query(f"SELECT max(rowid) FROM [{table}]")).fetchone()[0] or 0
    if rows < STATISTICS_MIN_ROWS:
        return False
    measured = None
    if _has_statistics(conn):
        stat = conn.execute(SQLITE.query("SELECT stat FROM sqlite_stat1 WHERE tbl = ? AND stat IS NOT NULL LIMIT 1"),
                            [table]).fetchone()
        measured = int(stat[0].split()[0]) if stat else None
    if measured is not None and abs(measured - rows) <= STATISTICS_DRIFT * rows:
        return False
    conn.execute(SQLITE.write(f"ANALYZE [{table}]"))
    return True


def analyse_unmeasured_indexes(conn, table: str) -> None:
    """Statistics for every index of an analysed `table` that has none (an empty partial index
    has none after ANALYZE either: measured again, at no cost)."""
    if _has_statistics(conn):
        measured = {row[0] for row in conn.execute(SQLITE.query("SELECT idx FROM sqlite_stat1 WHERE tbl = ?"), [table])}
        analyse_indexes(conn, table, index_names(conn, table) - measured)


def analyse_indexes(conn, table: str, new: set[str]) -> None:
    """Statistics for indexes added to a table someone analysed: without them the planner
    weighs a new index by a guess against its measured neighbours, and took a new index
    lacking a column a query tests (reading each row for it) over a measured one holding it.
    `conn`: a sqlite3 connection or a sqlite-utils database."""
    if not new or not _has_statistics(conn):
        return
    if conn.execute(SQLITE.query("SELECT 1 FROM sqlite_stat1 WHERE tbl = ? LIMIT 1"), [table]).fetchone() is None:
        return
    for name in sorted(new):
        conn.execute(SQLITE.write(f"ANALYZE [{name}]"))


__all__ = ["STATISTICS_MIN_ROWS", "STATISTICS_DRIFT", "refresh_statistics", "analyse_unmeasured_indexes",
           "analyse_indexes", "index_names"]
