"""Is this file a basecrawler database? Answered from the file itself, before any `Store`
opens it: opening migrates, so a read command handed a zero-length file, a foreign SQLite
database or a text file would write a schema into it (0 → 139,264 bytes).

Only `run` and `migrate` may initialise a new or empty file; every read command (status,
search, export, dead-letters, types, browse) checks first and leaves the file as it found it.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

from basecrawler.errors import ConfigError
from basecrawler.store.engines.dialect import SQLITE

SQLITE_HEADER = b"SQLite format 3\x00"
# Tables every basecrawler store has had since its first migration.
CORE_TABLES = frozenset({"recalls", "crawl_runs", "dead_letters"})


class NotABasecrawlerDatabase(ConfigError):
    kind = "not_a_database"

    def __init__(self, path: str, why: str):
        self.path = path
        super().__init__(f"{path} is not a basecrawler database ({why}); "
                         "give the right --db, or `basecrawler run` to start a new one in an empty file")


def _read_only_uri(path: Path) -> str:
    # mode=ro: SQLite never writes to the main file (a WAL store may still get its -shm beside it).
    return f"file:{quote(str(path.absolute()))}?mode=ro"


def check_basecrawler_database(path: str | Path) -> None:
    """Raise NotABasecrawlerDatabase unless `path` is an SQLite file holding basecrawler's
    tables. Reads only: the file is unchanged byte for byte whatever the answer."""
    path = Path(path)
    with open(path, "rb") as handle:
        header = handle.read(len(SQLITE_HEADER))
    if not header:
        raise NotABasecrawlerDatabase(str(path), "the file is empty")
    if header != SQLITE_HEADER:
        raise NotABasecrawlerDatabase(str(path), "not an SQLite file")
    try:
        conn = sqlite3.connect(_read_only_uri(path), uri=True)
        try:
            tables = {name for (name,) in conn.execute(SQLITE.query("SELECT name FROM sqlite_master WHERE type = 'table'"))}
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:   # a damaged file behind a valid header
        raise NotABasecrawlerDatabase(str(path), f"SQLite cannot read it: {exc}") from None
    missing = CORE_TABLES - tables
    if missing:
        raise NotABasecrawlerDatabase(str(path), f"no {', '.join(sorted(missing))} table")


__all__ = ["check_basecrawler_database", "NotABasecrawlerDatabase", "SQLITE_HEADER"]
