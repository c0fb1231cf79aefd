"""Copying a whole store from one engine to another (`basecrawler migrate`).

Every table of the schema (recalls, runs, dead letters, enrichment queue, responses index,
artifact manifest, list ledger, translation memory, meta) is copied row for row with its ids,
into a target that must be empty; then the counts are compared table by table. After the copy
the target's own indexes are brought up to date: PostgreSQL's identity sequences continue after
the copied ids, SQLite's full-text index is rebuilt.
"""
from __future__ import annotations

import logging

from ..errors import ConfigError
from ..schema import reference_schema

log = logging.getLogger(__name__)

CHUNK = 1000


class TargetNotEmpty(ConfigError):
    """`migrate --to` a database that already holds data (a usage error: exit 2)."""

    kind = "target_not_empty"


def _columns(store, table: str) -> list[str]:
    cursor = store.db.conn.execute(f"SELECT * FROM {table} WHERE 1 = 0")
    return [d[0] for d in cursor.description]


def copy_store(source, target) -> dict[str, tuple[int, int]]:
    """Copy every table of `source` (a Store) into `target` (an empty Store of either engine);
    returns {table: (rows in source, rows in target)}."""
    tables = list(reference_schema())
    busy = [t for t in tables if target.scalar(f"SELECT COUNT(*) FROM {t}")]
    if busy:
        raise TargetNotEmpty(f"the target already holds rows in {', '.join(busy)}; migrate into an empty database")
    counts = {}
    for table in tables:
        names = [c for c in _columns(source, table) if c in set(_columns(target, table))]
        quoted = ", ".join(f"[{n}]" for n in names)
        insert = f"INSERT INTO {table} ({quoted}) VALUES ({', '.join('?' * len(names))})"
        cursor = source.db.conn.execute(f"SELECT {quoted} FROM {table}")

        def copy(db):
            batch = []
            for row in cursor:
                batch.append(list(row))
                if len(batch) >= CHUNK:
                    db.conn.executemany(insert, batch)
                    batch = []
            if batch:
                db.conn.executemany(insert, batch)
            if target.engine == "postgresql" and "id" in names:
                db.conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                                f"(SELECT COALESCE(MAX(id), 0) + 1 FROM {table}), false)")
        target.write(copy)
        counts[table] = (source.scalar(f"SELECT COUNT(*) FROM {table}"), target.scalar(f"SELECT COUNT(*) FROM {table}"))
        log.info("migrate: %s %d → %d rows", table, *counts[table])
    if target.engine == "sqlite":
        target.write(lambda db: db.conn.execute("INSERT INTO recalls_fts(recalls_fts) VALUES ('rebuild')"))
    return counts


__all__ = ["copy_store", "TargetNotEmpty"]
