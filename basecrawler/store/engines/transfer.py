"""Copying a whole store from one engine to another (`basecrawler migrate`), and read-only
SQLite snapshots of a PostgreSQL store (`snapshot_to_sqlite`, for Datasette, which reads SQLite).

The tables are discovered in the source database, not listed here: every table it holds is
copied, including those a record type or a schema extension added (a table the target does
not have yet is created there with the source's columns and key; a missing column is added).
Left out are only each engine's own machinery: SQLite's full-text index tables (rebuilt in a
SQLite target from the copied rows) and the migration bookkeeping (`schema_version`,
`schema_extensions`: the target keeps its own, written when it was opened).

Rows are copied with their ids into a target that must be empty, one transaction per table;
then the counts are compared table by table. A table that cannot be copied (a value the target
refuses, a type it cannot hold) is rolled back and reported with its error: the copy goes on
with the other tables and the result says which failed, so `migrate` can exit non-zero naming
it. After the copy PostgreSQL's identity sequences continue after the copied ids.
"""
from __future__ import annotations

import logging
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from basecrawler.errors import ConfigError, CrawlerError
from basecrawler.recordtypes import record_types
from basecrawler.recordtypes.tables import fts_table
from basecrawler.store.engines.dialect import POSTGRES, SQLITE, dialect_of

log = logging.getLogger(__name__)

CHUNK = 1000
BOOKKEEPING = frozenset({"schema_version", "schema_extensions"})
_FTS_SHADOWS = ("data", "idx", "content", "docsize", "config")


class TargetNotEmpty(ConfigError):
    """`migrate --to` a database that already holds data (a usage error: exit 2)."""

    kind = "target_not_empty"


class TransferFailed(CrawlerError):
    """Some tables could not be copied (their names and errors are in the message)."""

    kind = "transfer_failed"


@dataclass
class TableCopy:
    source_rows: int
    target_rows: int | None = None
    error: str | None = None
    created: bool = False        # the target did not have the table: made from the source's columns

    @property
    def ok(self) -> bool:
        return self.error is None and self.source_rows == self.target_rows


# ---- what a database holds ---------------------------------------------------------------
def tables(store) -> list[str]:
    """The data tables of a store, discovered from the database itself."""
    if store.engine == "sqlite":
        rows = store.query(SQLITE.query("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"))
        virtual = {r["name"] for r in rows if (r["sql"] or "").upper().startswith("CREATE VIRTUAL TABLE")}
        shadows = {f"{v}_{suffix}" for v in virtual for suffix in _FTS_SHADOWS}
        names = [r["name"] for r in rows if r["name"] not in virtual | shadows]
    else:
        names = [r["table_name"] for r in store.query(POSTGRES.query(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
            "AND table_type = 'BASE TABLE'"))]
    return sorted(n for n in names if n not in BOOKKEEPING)


def columns(store, table: str) -> list[tuple[str, str]]:
    """(name, declared type) of each column, in order."""
    if store.engine == "sqlite":
        return [(r["name"], r["type"] or "") for r in store.query(SQLITE.query(f"PRAGMA table_info({SQLITE.quote(table)})"))]
    return [(r["column_name"], r["data_type"]) for r in store.query(POSTGRES.query(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name = %s ORDER BY ordinal_position"), [table])]


def primary_key(store, table: str) -> list[str]:
    if store.engine == "sqlite":
        info = [r for r in store.query(SQLITE.query(f"PRAGMA table_info({SQLITE.quote(table)})")) if r["pk"]]
        return [r["name"] for r in sorted(info, key=lambda r: r["pk"])]
    return [r["attname"] for r in store.query(POSTGRES.query(
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = CAST(%s AS regclass) AND i.indisprimary "
        "ORDER BY array_position(CAST(i.indkey AS int2[]), a.attnum)"), [table])]


def _type_for(target, declared: str) -> str:
    """The target engine's type for a column declared `declared` on the other (or same) engine."""
    kind = declared.upper()
    if "INT" in kind:
        return "BIGINT" if target.engine == "postgresql" else "INTEGER"
    if any(word in kind for word in ("REAL", "FLOA", "DOUB", "NUMERIC", "DECIMAL")):
        return "DOUBLE PRECISION" if target.engine == "postgresql" else "REAL"
    if "BLOB" in kind or "BYTEA" in kind:
        return "BYTEA" if target.engine == "postgresql" else "BLOB"
    return "TEXT"


def _prepare_target_table(source, target, table: str) -> tuple[list[str], bool]:
    """The columns to copy; creates the table or adds the columns the target lacks."""
    wanted = columns(source, table)
    have = {name for name, _ in columns(target, table)}
    created = not have
    d = dialect_of(target)
    if created:
        key = primary_key(source, table)
        parts = [f'{d.quote(name)} {_type_for(target, kind)}' for name, kind in wanted]
        if key:
            parts.append("PRIMARY KEY (" + ", ".join(map(d.quote, key)) + ")")
        target.write(lambda db: db.conn.execute(d.write(f'CREATE TABLE {d.quote(table)} ({", ".join(parts)})')))
        log.warning("migrate: %s is not part of this installation's schema; created from the source's columns", table)
    else:
        for name, kind in wanted:
            if name not in have:
                target.write(lambda db: db.conn.execute(d.write(
                    f'ALTER TABLE {d.quote(table)} ADD COLUMN {d.quote(name)} {_type_for(target, kind)}')))
                log.warning("migrate: %s.%s added to the target", table, name)
    return [name for name, _ in wanted], created


def _count(store, table: str) -> int:
    d = dialect_of(store)
    return store.scalar(d.query(f'SELECT COUNT(*) FROM {d.quote(table)}'))


# ---- the copy ----------------------------------------------------------------------------
def copy_store(source, target) -> dict[str, TableCopy]:
    """Copy every table of `source` (a Store) into `target` (an empty Store of either engine);
    returns {table: TableCopy}. Never raises for one table: its TableCopy has the error."""
    for store in (source, target):
        if store.engine == "postgresql":   # reading or writing a whole big table is one long statement
            store.db.conn.execute(POSTGRES.write("SET statement_timeout = 0"))
    found = tables(source)
    target_tables = set(tables(target))
    busy = [t for t in found if t in target_tables and _count(target, t)]
    if busy:
        raise TargetNotEmpty(f"the target already holds rows in {', '.join(busy)}; migrate into an empty database")
    result: dict[str, TableCopy] = {}
    for table in found:
        copy = result[table] = TableCopy(source_rows=_count(source, table))
        try:
            names, copy.created = _prepare_target_table(source, target, table)
            _copy_rows(source, target, table, names)
        except Exception as exc:   # one table's failure is reported by name; the others still copy
            copy.error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            log.error("migrate: %s could not be copied: %s", table, copy.error)
        try:
            copy.target_rows = _count(target, table)
        except Exception as exc:
            copy.error = copy.error or f"{type(exc).__name__}: {exc}"
        log.info("migrate: %s %d → %s rows", table, copy.source_rows, copy.target_rows)
    _rebuild_fts(target)
    return result


def _copy_rows(source, target, table: str, names: list[str]) -> None:
    d, s = dialect_of(target), dialect_of(source)
    insert = d.write(f'INSERT INTO {d.quote(table)} ({", ".join(map(d.quote, names))}) VALUES ({d.params(len(names))})')
    cursor = source.db.conn.execute(s.query(f'SELECT {", ".join(map(s.quote, names))} FROM {s.quote(table)}'))
    identity = _identity_columns(target, table) if target.engine == "postgresql" else []

    def copy(db):
        batch = []
        for row in cursor:
            batch.append(list(row))
            if len(batch) >= CHUNK:
                db.conn.executemany(insert, batch)
                batch = []
        if batch:
            db.conn.executemany(insert, batch)
        for column in identity:   # new rows continue after the copied ids
            db.conn.execute(POSTGRES.write(f"SELECT setval(pg_get_serial_sequence('\"{table}\"', '{column}'), "
                                           f'(SELECT COALESCE(MAX("{column}"), 0) + 1 FROM "{table}"), false)'))
    target.write(copy)


def _identity_columns(store, table: str) -> list[str]:
    return [r["column_name"] for r in store.query(POSTGRES.query(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name = %s AND (is_identity = 'YES' OR column_default LIKE 'nextval%%')"), [table])]


def _rebuild_fts(store) -> None:
    """Every full-text index of a SQLite target rebuilt from its (copied) content table: every
    declared type's (`Store.rebuild_search_indexes`), then any other FTS5 table the copy holds
    (the index of a type whose module is not installed here). PostgreSQL's indexes need nothing."""
    if store.engine != "sqlite":
        return
    store.records.rebuild_search_indexes()
    declared = {fts_table(record_type) for record_type in record_types().values() if record_type.text_index_columns}
    for row in store.query(SQLITE.query(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%fts5%'")):
        if row["name"] not in declared:
            name = SQLITE.quote(row["name"])
            store.write(lambda db, name=name: db.conn.execute(SQLITE.write(f"INSERT INTO {name}({name}) VALUES ('rebuild')")))


def failed_tables(result: dict[str, TableCopy]) -> list[str]:
    return [table for table, copy in result.items() if not copy.ok]


# ---- a SQLite snapshot of a PostgreSQL store ---------------------------------------------
def snapshot_to_sqlite(url: str, path: str | Path) -> dict[str, TableCopy]:
    """A read-only SQLite copy of the store at `url` (any engine) in `path`, e.g. for `browse`
    (Datasette reads SQLite only). Written beside `path` and moved over it when complete, so a
    reader never sees half a snapshot; the file is one self-contained database (no WAL) with
    read-only permissions. Raises TransferFailed naming the tables that could not be copied."""
    from basecrawler.store.core import Store

    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    for leftover in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm")):
        leftover.unlink(missing_ok=True)
    source = Store(url)
    try:
        target = Store(str(partial))
        try:
            result = copy_store(source, target)
        finally:
            target.close()
    finally:
        source.close()
    failed = failed_tables(result)
    if failed:
        partial.unlink(missing_ok=True)
        raise TransferFailed("snapshot incomplete, tables not copied: " + "; ".join(
            f"{t} ({result[t].error or 'counts differ'})" for t in failed))
    conn = sqlite3.connect(partial)
    try:
        conn.execute(SQLITE.write("PRAGMA journal_mode = DELETE"))   # fold the WAL in: one file to open read-only
    finally:
        conn.close()
    os.chmod(partial, 0o444)
    os.replace(partial, path)
    return result


__all__ = ["copy_store", "snapshot_to_sqlite", "tables", "failed_tables", "TableCopy", "TargetNotEmpty",
           "TransferFailed"]
