"""A full disk, recognised whatever reports it, so a run ends with one line and exit 3.

SQLite says "database or disk is full" (SQLITE_FULL, also when `max_page_count` is reached),
the file system ENOSPC / EDQUOT, PostgreSQL SQLSTATE 53100. Nothing is lost by stopping: every
batch committed before the failing one stays, and the run row is closed `failed`.
"""
from __future__ import annotations

import errno
import logging
import sqlite3
from pathlib import Path

from basecrawler.store.engines import is_postgres_url, redact

_SQLITE_FULL = 13
_TEXTS = ("database or disk is full", "no space left on device", "disk quota exceeded", "could not extend file")
_ERRNOS = {errno.ENOSPC, errno.EDQUOT}


def is_disk_full(error: BaseException | str | None) -> bool:
    """True for an exception (or its cause / context) or an error text meaning "disk full"."""
    if error is None:
        return False
    if isinstance(error, str):
        return any(text in error.lower() for text in _TEXTS)
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, sqlite3.Error) and getattr(error, "sqlite_errorcode", None) == _SQLITE_FULL:
            return True
        if isinstance(error, OSError) and error.errno in _ERRNOS:
            return True
        if getattr(error, "sqlstate", None) == "53100":   # psycopg DiskFull
            return True
        if is_disk_full(str(error)):
            return True
        error = error.__cause__ or error.__context__
    return False


def disk_full_line(db_path: str) -> str:
    """The one line a run ends with."""
    if is_postgres_url(db_path):
        where = f"the PostgreSQL server of {redact(db_path)}"
    else:
        where = f"{Path(db_path).absolute().parent} (database {db_path})"
    return (f"disk full at {where}: stopped; everything stored before is kept and the run is recorded failed. "
            "Free space there, then run again")


class NoTracebackForDiskFull(logging.Filter):
    """A full disk is a classified failure: its log line keeps the message, not the traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and is_disk_full(record.exc_info[1]):
            record.exc_info, record.exc_text = None, None
        return True


__all__ = ["is_disk_full", "disk_full_line", "NoTracebackForDiskFull"]
