"""PostgreSQL through psycopg 3, behind the sqlite3 surface the store and its callers use.

`PgConnection.execute(sql, params)` takes the project's SQL as written for SQLite and rewrites
the few spellings that differ (cached per statement):
- `?` → `%s` (and a literal `%` → `%%`), `[column]` → `"column"`;
- `a IS b` / `a IS NOT b` between values → `IS [NOT] DISTINCT FROM` (SQLite's null-safe compare);
- `INSERT OR IGNORE` → `INSERT … ON CONFLICT DO NOTHING`;
- `LIKE` → `ILIKE` (SQLite's LIKE ignores ASCII case);
- `BEGIN IMMEDIATE` → `BEGIN`.
Everything else the project writes (ON CONFLICT … DO UPDATE, excluded.*, RETURNING, SAVEPOINT,
COALESCE, CASE) is already common to both. Values keep today's types: timestamps and JSON are
ISO / JSON text, booleans are stored as 0/1, and numeric results come back as int or float
rather than Decimal, as SQLite returns them.

The connection is in autocommit mode and the store opens its transactions with BEGIN … COMMIT,
exactly as on SQLite. Each connection names itself `basecrawler <host> <pid>` so the store can
tell a live crawl on any machine from a crashed one (pg_stat_activity).
"""
from __future__ import annotations

import functools
import os
import re
import socket
from decimal import Decimal
from typing import Any, Iterable

import psycopg
from psycopg import pq
from psycopg.adapt import Loader

_STRING = re.compile(r"('(?:[^']|'')*')")
_BRACKET = re.compile(r"\[(\w+)\]")
_NAMED = re.compile(r"(?<![:\w]):(\w+)")
_IS_NOT = re.compile(r"\bIS\s+NOT\s+(?!NULL\b|DISTINCT\b|TRUE\b|FALSE\b)", re.I)
_IS = re.compile(r"\bIS\s+(?!NOT\b|NULL\b|DISTINCT\b|TRUE\b|FALSE\b)", re.I)
_LIKE = re.compile(r"\bLIKE\b", re.I)
_BEGIN = re.compile(r"\bBEGIN\s+IMMEDIATE\b", re.I)
_OR_IGNORE = re.compile(r"\bINSERT\s+OR\s+IGNORE\b", re.I)
_IFNULL = re.compile(r"\bIFNULL\s*\(", re.I)
_RETURNING = re.compile(r"\sRETURNING\s", re.I)

APPLICATION_PREFIX = "basecrawler"


@functools.lru_cache(maxsize=4096)
def translate(sql: str, named: bool = False) -> str:
    """The PostgreSQL spelling of one statement written for SQLite (string literals untouched
    except for `%`, which psycopg reads as a placeholder)."""
    parts = _STRING.split(sql)
    ignore = False
    for index, part in enumerate(parts):
        part = part.replace("%", "%%")
        if index % 2 == 0:   # outside string literals
            part = _BRACKET.sub(r'"\1"', part)
            part = _NAMED.sub(r"%(\1)s", part) if named else part.replace("?", "%s")
            part = _IS_NOT.sub("IS DISTINCT FROM ", part)
            part = _IS.sub("IS NOT DISTINCT FROM ", part)
            part = _LIKE.sub("ILIKE", part)
            part = _BEGIN.sub("BEGIN", part)
            part = _IFNULL.sub("COALESCE(", part)
            if _OR_IGNORE.search(part):
                part = _OR_IGNORE.sub("INSERT", part)
                ignore = True
        parts[index] = part
    out = "".join(parts)
    if ignore:
        match = _RETURNING.search(out)
        at = match.start() if match else len(out.rstrip().rstrip(";"))
        out = out[:at] + " ON CONFLICT DO NOTHING" + out[at:]
    return out


def _bind(params: Any) -> tuple[Any, bool]:
    """(params for psycopg, named?) with booleans as 0/1 like SQLite stores them."""
    if params is None:
        return [], False
    if isinstance(params, dict):
        return {k: int(v) if isinstance(v, bool) else v for k, v in params.items()}, True
    return [int(v) if isinstance(v, bool) else v for v in params], False


class _NumericLoader(Loader):
    """numeric (SUM, AVG of integers) as int or float, the types SQLite hands back."""

    def load(self, data):
        value = Decimal(bytes(data).decode())
        return int(value) if value == value.to_integral_value() else float(value)


class Cursor:
    """The part of sqlite3.Cursor the project uses."""

    def __init__(self, cursor: psycopg.Cursor):
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def description(self):
        return [(c.name, None, None, None, None, None, None) for c in self._cursor.description or ()]

    @property
    def lastrowid(self):
        raise NotImplementedError("PostgreSQL has no lastrowid: use INSERT … RETURNING id")

    def fetchone(self):
        return self._cursor.fetchone() if self._cursor.description else None

    def fetchall(self) -> list:
        return self._cursor.fetchall() if self._cursor.description else []

    def __iter__(self):
        return iter(self._cursor) if self._cursor.description else iter(())


class PgConnection:
    """sqlite3.Connection's surface over one psycopg connection (autocommit; BEGIN/COMMIT by
    the caller, as the store does on SQLite)."""

    dialect = "postgresql"

    def __init__(self, url: str):
        self.url = url
        self.raw = psycopg.connect(url, autocommit=True,
                                   application_name=application_name())
        self.raw.adapters.register_loader("numeric", _NumericLoader)

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != pq.TransactionStatus.IDLE

    def execute(self, sql: str, params: Iterable | dict | None = None) -> Cursor:
        bound, named = _bind(params)
        cursor = self.raw.cursor()
        # Never as a prepared statement: its generic plan cannot see the values, and for
        # `recall_number = ANY(…)` on a young table it scanned every row of the country (40×
        # slower). executemany keeps psycopg's preparing, where one plan serves many rows.
        cursor.execute(translate(sql, named), bound, prepare=False)
        return Cursor(cursor)

    def executemany(self, sql: str, seq: Iterable) -> Cursor:
        rows = [_bind(p)[0] for p in seq]
        cursor = self.raw.cursor()
        if rows:
            cursor.executemany(translate(sql, isinstance(rows[0], dict)), rows)
        return Cursor(cursor)

    def executescript(self, sql: str) -> None:
        """PostgreSQL DDL as written (no rewriting), several statements at once."""
        self.raw.execute(sql)

    def close(self) -> None:
        self.raw.close()


class PgDatabase:
    """What the store hands to `write()` operations on PostgreSQL: `.conn` as on sqlite-utils'
    Database, plus `execute` and `query` (rows as dicts)."""

    dialect = "postgresql"

    def __init__(self, url: str):
        self.conn = PgConnection(url)

    def execute(self, sql: str, params=None) -> Cursor:
        return self.conn.execute(sql, params)

    def query(self, sql: str, params=None):
        cursor = self.conn.execute(sql, params)
        names = [d[0] for d in cursor.description]
        for values in cursor:
            yield dict(zip(names, values))

    def executescript(self, sql: str) -> None:
        self.conn.executescript(sql)

    def table_names(self) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
            "ORDER BY table_name").fetchall()]


def application_name() -> str:
    """`basecrawler <host> <pid>` (63 bytes at most, PostgreSQL's limit)."""
    return f"{APPLICATION_PREFIX} {socket.gethostname()[:40]} {os.getpid()}"


def is_retryable(exc: BaseException) -> bool:
    """A deadlock or serialisation failure: the transaction can simply run again."""
    return isinstance(exc, (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure))


__all__ = ["PgConnection", "PgDatabase", "Cursor", "translate", "application_name", "is_retryable"]
