"""Whose fault a database error is, whatever the engine: a lock (the whole transaction may run
again), the database's own (a full or broken file: nothing to bisect), or a row's (the batch is
bisected down to the rows that break it)."""
from __future__ import annotations

import sqlite3


def is_locked_error(exc: BaseException) -> bool:
    """SQLite's `database is locked`, or PostgreSQL's deadlock / serialisation failure: the
    whole transaction may simply run again."""
    if isinstance(exc, sqlite3.OperationalError):
        return "database is locked" in str(exc) or "database is busy" in str(exc)
    if isinstance(exc, db_errors()[1:]):   # psycopg's errors, and a lost connection (engines/pg.py)
        from basecrawler.store.engines.pg import is_retryable
        return is_retryable(exc)
    return False


def db_errors() -> tuple[type[BaseException], ...]:
    """Errors by which a database refuses a row, whatever the engine."""
    try:
        import psycopg
    except ImportError:
        return (sqlite3.Error,)
    return (sqlite3.Error, psycopg.Error)


def refused_errors(engine: str) -> tuple[type[BaseException], ...]:
    """The errors by which `engine` refuses a row (psycopg's only where they can happen:
    importing it costs an SQLite run 0.1 s)."""
    return (sqlite3.Error,) if engine == "sqlite" else db_errors()


# SQLite's codes for a failure that is the database's, not a row's: the disk is full, or it
# cannot be written. Bisecting would only make every row a dead letter.
_NOT_A_ROWS_FAULT = (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CORRUPT)


def refused_row(conn, exc: BaseException) -> bool:
    """Whether a failed write may be bisected to the rows that broke it: not a lock (the whole
    transaction is retried), not a full or broken database, and the transaction still open
    (SQLite rolls it all back itself on some errors)."""
    primary_code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF   # (the extended code's low byte)
    if is_locked_error(exc) or primary_code in _NOT_A_ROWS_FAULT:
        return False
    return conn.in_transaction


__all__ = ["is_locked_error", "db_errors", "refused_errors", "refused_row"]
