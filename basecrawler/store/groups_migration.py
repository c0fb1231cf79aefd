"""The copy flag for stores made before it (store/groups.py): every record type's table gets
the `is_copy` column, and the records the group table already names as copies are flagged, with
the indexes that hold the flag. Without this, a store grouped by an older version would show
its copies again until the next run of a linked source re-links them.

The same work on both engines, each statement spelled for its own (store/engines/dialect.py),
wired as one line each (they are numbered lists another module keeps): SQLite `MIGRATIONS` (store/migrations.py) gets `m013_copy_flags`, PostgreSQL `STEPS`
(store/engines/pg_migrations.py) gets `p011_copy_flags`. Both run before the tables of record
types are brought up to their declarations, so the column is added here when it is missing (the
same column those would add: NULL for every record that is no copy).
"""
from __future__ import annotations

import logging

from basecrawler.recordtypes import record_types
from basecrawler.store import groups
from basecrawler.store.engines.dialect import dialect_of

log = logging.getLogger(__name__)


def _exists(conn, table: str) -> bool:
    d = dialect_of(conn)
    if d.name == "postgresql":
        return conn.execute(d.query(f"SELECT to_regclass({d.p})"), [d.quote(table)]).fetchone()[0] is not None
    return conn.execute(d.query(f"SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = {d.p}"),
                        [table]).fetchone() is not None


def _columns(conn, table: str) -> set[str]:
    d = dialect_of(conn)
    cursor = conn.execute(d.query(f"SELECT * FROM {d.quote(table)} LIMIT 0"))
    return {c[0] for c in cursor.description}


def copy_flags(conn) -> int:
    """Add the flag column where it is missing and flag every linked copy (either engine, inside
    the caller's transaction). Returns the records flagged."""
    d = dialect_of(conn)
    grouped = _exists(conn, groups.TABLE)
    flagged = 0
    for record_type in record_types().values():
        if not _exists(conn, record_type.table):
            continue
        if groups.FLAG not in _columns(conn, record_type.table):
            kind = "BIGINT" if d.name == "postgresql" else "INTEGER"
            conn.execute(d.write(f"ALTER TABLE {d.quote(record_type.table)} ADD COLUMN {d.quote(groups.FLAG)} {kind}"))
        if grouped and groups.has_copies(conn, record_type):
            flagged += groups.flag_copies(conn, record_type)
    if flagged:
        log.info("record groups: %d stored copies flagged for the readers", flagged)
    return flagged


def m013_copy_flags(db) -> None:
    """SQLite migration 13 (a sqlite-utils Database, as every numbered migration takes)."""
    copy_flags(db.conn)


def p011_copy_flags(conn) -> None:
    """PostgreSQL step 11 (the store's PostgreSQL connection)."""
    copy_flags(conn)


__all__ = ["copy_flags", "m013_copy_flags", "p011_copy_flags"]
