"""A machine that reaches no publisher at all (no network, a proxy in the way): `doctor` says
so in one line instead of one ✗ per endpoint, with what to do, and whether the store it has
can still be read (a full store on an offline laptop is fine for reading).

Read-only: the store is opened with SQLite's `mode=ro` (PostgreSQL: a plain query)."""
from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import urlsplit

from basecrawler.recordtypes import record_types
from basecrawler.store.engines import is_postgres_url
from basecrawler.store.engines.dialect import POSTGRES, SQLITE, Dialect


def reaches_no_publisher(results: list, offline_fix: str) -> bool:
    """Whether every endpoint probe (two or more) failed for want of a connection (the
    `offline_fix` doctor gives an unreachable host), not one host answering badly."""
    return len(results) >= 2 and all(not r.ok and r.fix == offline_fix for r in results)


def offline_detail(results: list, records: int | None) -> str:
    hosts = sorted({urlsplit(r.detail.split()[0]).hostname or "?" for r in results})
    shown = ", ".join(hosts[:4]) + (f" and {len(hosts) - 4} more" if len(hosts) > 4 else "")
    reading = (f"; the store holds {records:,} records, so search, export and the web view still work"
               if records else "; the store is empty, so there is nothing to read yet")
    return f"this machine reaches no publisher: none of the {len(results)} source endpoints answered ({shown}){reading}"


def store_records(db_path: str) -> int | None:
    """Records of every declared type in the store (None: no store, or it cannot be read)."""
    try:
        if is_postgres_url(db_path):
            from basecrawler.store.core import Store

            store = Store(db_path)
            try:
                return sum(_count(lambda sql: store.query(POSTGRES.query(sql), [])[0]["n"], t.table)
                           for t in record_types().values())
            finally:
                store.close()
        if not Path(db_path).is_file():
            return None
        conn = sqlite3.connect(f"file:{Path(db_path).resolve()}?mode=ro", uri=True)
        try:
            tables = {row[0] for row in conn.execute(SQLITE.query("SELECT name FROM sqlite_master WHERE type = 'table'"))}
            return sum(_count(lambda sql: conn.execute(SQLITE.query(sql)).fetchone()[0], t.table)
                       for t in record_types().values() if t.table in tables)
        finally:
            conn.close()
    except Exception:   # the database line of doctor says why
        return None


def _count(run, table: str) -> int:
    """`run(sql)` of the count of `table`, spelled the same on both engines (the caller states it)."""
    return int(run(f'SELECT COUNT(*) AS n FROM {Dialect.quote(table)}') or 0)


__all__ = ["reaches_no_publisher", "offline_detail", "store_records"]
