"""The database schema: running the numbered migrations (migrations.py, tracked in `PRAGMA
user_version`), the tables of record types (derived from their declarations, recordtypes/
tables.py: `ensure_types`), schema extensions, and the PostgreSQL schema derived from all three.

Each migration is a function taking a sqlite-utils Database, run once in order inside a
transaction. To change the core schema, append a function to migrations.MIGRATIONS; never edit
an old one. A record type's table needs no migration: it is created and evolved from its
declaration on open.

Schema extensions: a package that keeps its own tables in the store (the translate package's
`translation_memory`) owns their migrations and hands them to the framework, which never
imports it: an entry point in the group `basecrawler.schema` naming a list of migration
functions (or `register_schema_extension(name, migrations)` in-process). `migrate()` runs the
core migrations, then each extension's (by name) that the database has not had yet; how many
of an extension's migrations ran is kept in the `schema_extensions` table (name → version),
with the same rules as the core: append, never edit, one write transaction per migration.
"""
from __future__ import annotations

import functools
import importlib.metadata
import logging
from collections.abc import Callable, Sequence

import sqlite_utils

from basecrawler.store.engines.dialect import SQLITE
from basecrawler.store.migrations import MIGRATIONS, PG_DROPPED_INDEXES
from basecrawler.recordtypes import record_types
from basecrawler.recordtypes.tables import ensure_sqlite, needs_ensure, pg_statements

log = logging.getLogger(__name__)

# Migrations run on SQLite (PostgreSQL gets the schema they make, derived below), so this
# module's statements are SQLite's.
BEGIN, COMMIT, ROLLBACK = (SQLITE.write(sql) for sql in (SQLITE.begin, "COMMIT", "ROLLBACK"))
USER_VERSION = SQLITE.query("PRAGMA user_version")

# ---- record types -------------------------------------------------------------------------
def ensure_types(db: sqlite_utils.Database) -> None:
    """The table of every known record type, created or evolved (recordtypes/tables.py); one
    write transaction per type that needs it, none when all are up to date."""
    for record_type in record_types().values():
        if not needs_ensure(db.conn, record_type):
            continue
        db.conn.execute(BEGIN)
        try:
            if needs_ensure(db.conn, record_type):   # again under the write lock
                ensure_sqlite(db, record_type)
            db.conn.execute(COMMIT)
        except BaseException:
            db.conn.execute(ROLLBACK)
            raise


# ---- schema extensions --------------------------------------------------------------------
SCHEMA_ENTRY_POINTS = "basecrawler.schema"
# The bookkeeping table of extension versions: the migration machinery's own, like
# `PRAGMA user_version`, so it is left out of the reference schema (and of `migrate --to`).
EXTENSIONS_TABLE = "schema_extensions"

Migration = Callable[[sqlite_utils.Database], None]
_registered: dict[str, list[Migration]] = {}


def register_schema_extension(name: str, migrations: Sequence[Migration]) -> None:
    """Add (or replace) the schema extension `name`: its migrations, oldest first. Like core
    migrations they take a sqlite-utils Database, run once each, and are only ever appended to."""
    _registered[name] = list(migrations)


@functools.lru_cache(maxsize=1)
def _installed_extensions() -> dict[str, list[Migration]]:
    found = {}
    for entry_point in importlib.metadata.entry_points(group=SCHEMA_ENTRY_POINTS):
        try:
            migrations = entry_point.load()
            found[entry_point.name] = list(migrations() if callable(migrations) else migrations)
        except Exception as exc:   # a broken plugin must not stop the crawl: its tables are left out
            log.warning("schema extension %s could not be loaded: %s", entry_point.name, exc)
    return found


def schema_extensions() -> dict[str, list[Migration]]:
    """{name: migrations} of the installed packages (entry points) and registered in-process,
    sorted by name (the order they run in); a registered name replaces an installed one."""
    extensions = {**_installed_extensions(), **_registered}
    return {name: extensions[name] for name in sorted(extensions)}


def _extension_version(db: sqlite_utils.Database, name: str) -> int:
    if EXTENSIONS_TABLE not in db.table_names():
        return 0
    row = db.execute(SQLITE.query(f"SELECT version FROM {EXTENSIONS_TABLE} WHERE name = ?"), [name]).fetchone()
    return row[0] if row else 0


def _migrate_extension(db: sqlite_utils.Database, name: str, migrations: Sequence[Migration]) -> int:
    version = _extension_version(db, name)
    for number, migration in enumerate(migrations, start=1):
        if number <= version:
            continue
        db.conn.execute(BEGIN)
        try:
            # Read the version again under the write lock (another process may have got there).
            ran = number > _extension_version(db, name)
            if ran:
                db.execute(SQLITE.write(f"CREATE TABLE IF NOT EXISTS {EXTENSIONS_TABLE} "
                                        "(name TEXT PRIMARY KEY, version INTEGER NOT NULL)"))
                migration(db)
                db.execute(SQLITE.write(f"INSERT INTO {EXTENSIONS_TABLE} (name, version) VALUES (?, ?) "
                                        "ON CONFLICT(name) DO UPDATE SET version = excluded.version"), [name, number])
            db.conn.execute(COMMIT)
        except BaseException:
            db.conn.execute(ROLLBACK)
            raise
        if ran:
            log.debug("schema extension %s migrated to version %d (%s)", name, number, migration.__name__)
        version = number
    return version


# ---- PostgreSQL ---------------------------------------------------------------------------
# The PostgreSQL schema is derived from the SQLite one, so both engines always carry the same
# tables, columns, keys and indexes: a fresh in-memory SQLite database is migrated to the newest
# version and read back (tables, column types, primary keys, indexes); PostgreSQL gets the
# missing ones, additively. A new SQLite migration that adds a table, column or index therefore
# reaches PostgreSQL with no second migration to write; so do the tables of record types
# (ensure_types runs on the reference database too). What SQLite does with FTS5 and triggers,
# PostgreSQL does with one pg_trgm GIN index per type over its searched text (pg_extras()).

_PG_TYPES = {"TEXT": "TEXT", "INTEGER": "BIGINT", "FLOAT": "DOUBLE PRECISION", "REAL": "DOUBLE PRECISION",
             "BLOB": "BYTEA", "": "TEXT"}

def pg_extras() -> list[str]:
    """The pg_trgm extension, and each type's trigram search index and translation queue."""
    return ["CREATE EXTENSION IF NOT EXISTS pg_trgm",
            *(statement for rt in record_types().values() for statement in pg_statements(rt))]


def _pg_type(kind: str) -> str:
    base, _, rest = kind.partition(" ")
    return _PG_TYPES.get(base, "TEXT") + (" " + rest if rest else "")


def reference_schema(*, types_only: bool = False) -> dict[str, dict]:
    """{table: {"columns": [(name, type)], "pk": [names], "indexes": [(name, unique, [cols])]}}
    of a SQLite database at the newest version, schema extensions and the tables of record
    types included (FTS tables and the extension bookkeeping left out). `types_only`: the
    tables of record types alone, as a new type would get them (a cheap check that runs no
    migration)."""
    import sqlite3

    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        db = sqlite_utils.Database(conn)
        if not types_only:
            migrate(db)
        ensure_types(db)
        virtual = [name for (name,) in conn.execute(SQLITE.query(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'"))]
        tables = {}
        for (name,) in conn.execute(SQLITE.query("SELECT name FROM sqlite_master WHERE type = 'table' "
                                                 "AND name NOT LIKE 'sqlite_%' AND name != ? ORDER BY name"),
                                    [EXTENSIONS_TABLE]):
            if any(name == v or name.startswith(v + "_") for v in virtual):
                continue   # a full-text index and its shadow tables: SQLite's own
            info = conn.execute(SQLITE.query(f"PRAGMA table_info({SQLITE.quote(name)})")).fetchall()
            indexes = []
            for _, index, unique, origin, partial in conn.execute(
                    SQLITE.query(f"PRAGMA index_list({SQLITE.quote(name)})")).fetchall():
                if origin == "pk" or partial:   # partial indexes reach PostgreSQL with their condition (pg_statements)
                    continue
                cols = [r[2] for r in conn.execute(SQLITE.query(f"PRAGMA index_info({SQLITE.quote(index)})")).fetchall()]
                indexes.append((index, bool(unique), cols))
            tables[name] = {
                "columns": [(r[1], (r[2] or "").upper() + (" NOT NULL" if r[3] else "")) for r in info],
                "pk": [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]],
                "indexes": indexes,
            }
        return tables
    finally:
        conn.close()


def pg_schema_statements(existing: dict[str, set[str]], indexes: dict[str, list[str]] | None = None,
                         reference: dict[str, dict] | None = None) -> list[str]:
    """DDL bringing a PostgreSQL database with these {table: columns} and {index: columns} to
    the reference schema: missing tables, columns and indexes are added; an index whose
    columns changed (a key that now includes the source) is made again."""
    indexes = indexes or {}
    statements = []
    for table, spec in (reference or reference_schema()).items():
        if table not in existing:
            cols = []
            for name, kind in spec["columns"]:
                pg_type = _pg_type(kind)
                if spec["pk"] == [name] and kind.startswith("INTEGER"):
                    # Explicit ids are accepted (a migrated database keeps its ids).
                    cols.append(f'"{name}" BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY')
                else:
                    cols.append(f'"{name}" {pg_type}')
            if len(spec["pk"]) > 1 or (spec["pk"] and not any("PRIMARY KEY" in c for c in cols)):
                cols.append("PRIMARY KEY (" + ", ".join(f'"{c}"' for c in spec["pk"]) + ")")
            statements.append(f'CREATE TABLE "{table}" ({", ".join(cols)})')
        else:
            for name, kind in spec["columns"]:
                if name not in existing[table]:
                    statements.append(f'ALTER TABLE "{table}" ADD COLUMN "{name}" {_pg_type(kind).replace(" NOT NULL", "")}')
        for index, unique, cols in spec["indexes"]:
            if index in indexes and indexes[index] != list(cols):
                statements.append(f'DROP INDEX "{index}"')
            statements.append(f'CREATE {"UNIQUE " if unique else ""}INDEX IF NOT EXISTS "{index}" ON "{table}" '
                              f'({", ".join(chr(34) + c + chr(34) for c in cols)})')
    return statements + [f'DROP INDEX IF EXISTS "{index}"' for index in PG_DROPPED_INDEXES] + pg_extras()


def pg_behind(reference: dict[str, dict], existing: dict[str, set[str]], indexes: dict[str, list[str]]) -> bool:
    """Whether a table, column or index of the reference is missing or an index differs."""
    for table, spec in reference.items():
        if table not in existing or any(name not in existing[table] for name, _ in spec["columns"]):
            return True
        if any(indexes.get(index) != list(cols) for index, _, cols in spec["indexes"]):
            return True
    return False


PG_INDEX_COLUMNS = (
    "SELECT i.relname, array_agg(a.attname ORDER BY k.n) FROM pg_index x "
    "JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid "
    "JOIN pg_namespace ns ON ns.oid = t.relnamespace "
    "CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, n) "
    "JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum "
    "WHERE ns.nspname = current_schema() GROUP BY i.relname")


def migrate(db: sqlite_utils.Database) -> int:
    """Bring the database to the newest schema: the core migrations, then those of each schema
    extension not applied yet; returns the core version reached."""
    version = db.execute(USER_VERSION).fetchone()[0]
    for number, migration in enumerate(MIGRATIONS, start=1):
        if number <= version:
            continue
        db.conn.execute(BEGIN)
        # Read the version again under the write lock: another process opening the same new
        # database may have migrated it while we waited.
        version = db.execute(USER_VERSION).fetchone()[0]
        if number <= version:
            db.conn.execute(COMMIT)
            continue
        try:
            migration(db)
            db.conn.execute(SQLITE.write(f"PRAGMA user_version = {number}"))
            db.conn.execute(COMMIT)
        except BaseException:
            db.conn.execute(ROLLBACK)
            raise
        log.debug("schema migrated to version %d (%s)", number, migration.__name__)
        version = number
    for name, migrations in schema_extensions().items():
        _migrate_extension(db, name, migrations)
    return version
