"""Step-wise migrations of a PostgreSQL store, as SQLite has them (schema.py): numbered steps,
applied once each, in order, recorded in `schema_version`.

Two parts, one transaction under an advisory lock (so crawlers starting together on one
server migrate it once):

1. **Steps** (`STEPS`): functions taking the PgConnection, numbered after `BASELINE`, for what
   cannot be derived: moving data, changing a key, renaming, dropping. Append, never edit.
   Every step that ran is a row of `schema_version` (version, applied_at, step).
2. **Derivation**: the tables, columns and indexes of the SQLite reference schema (schema.py's
   `pg_schema_statements`, schema extensions included) that are still missing are added. A
   SQLite migration that only adds a table, column or index therefore reaches PostgreSQL with
   no step to write. It runs after the steps, whenever the reference schema changed since the
   database last saw it (its fingerprint is kept with the newest version row) or an
   extension is behind.

A new database gets the newest schema by derivation alone and is recorded at the newest
version: steps exist to carry data forward, and a new database has none.

Releases up to 0880bd7 kept one row `schema_version(version)` holding 7 (the SQLite core
version then) and derived everything: that state is `BASELINE`, and step 8 turns the table into
the history the steps need (tests/test_pg_migrations.py starts from that release's schema,
fixtures/pg/schema_0880bd7.sql).
"""
from __future__ import annotations

import functools
import hashlib
import logging
import os
from collections.abc import Callable

from basecrawler.formats.dates import utc_now_iso
from basecrawler.recordtypes import record_types
from basecrawler.recordtypes.tables import (PG_SEARCH_INDEXES, pg_search_index_statements, pg_trgm_index_name,
                                            pg_windows_index_name)
from basecrawler.store.engines.dialect import POSTGRES
from basecrawler.store.groups_migration import p011_copy_flags
from basecrawler.store.schema import PG_INDEX_COLUMNS, EXTENSIONS_TABLE, pg_behind, pg_schema_statements, reference_schema, schema_extensions

log = logging.getLogger(__name__)
query, write = POSTGRES.query, POSTGRES.write   # every statement here is PostgreSQL's own

# What every database made before step-wise migrations holds in schema_version.
BASELINE = 7

Step = Callable[[object], None]


def _p008_version_history(conn) -> None:
    """schema_version becomes the history of the steps: one row per version with when it was
    applied, by which step, and the fingerprint of the reference schema it derived."""
    conn.executescript("ALTER TABLE schema_version ADD COLUMN IF NOT EXISTS applied_at TEXT, "
                       "ADD COLUMN IF NOT EXISTS step TEXT, ADD COLUMN IF NOT EXISTS reference TEXT")
    conn.execute(write("UPDATE schema_version SET step = 'baseline (derived schema up to 0880bd7)' WHERE step IS NULL"))


def _p009_refill_maker_keys(conn) -> None:
    """SQLite's migration 9 on PostgreSQL: the vehicle recalls' derived columns (the maker key)
    recomputed for rows stored before the maker table learned their names."""
    from basecrawler.store.migrations import refill_maker_keys

    refill_maker_keys(conn)


def _p010_generic_key_columns(conn) -> None:
    """SQLite's migration 10 on PostgreSQL: the dead letters' and enrichment queue's key columns
    renamed to generic names, in place (the rows and the unique key, which follows the columns,
    kept). The derivation after the steps then drops the queue key's old-named index and makes
    it under its new name."""
    from basecrawler.store.migrations import GENERIC_KEY_COLUMNS

    for table, renames in GENERIC_KEY_COLUMNS.items():
        present = {name for (name,) in conn.execute(query(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = %s"), [table]).fetchall()}
        for old, new in renames.items():
            if old in present and new not in present:
                conn.execute(write(f'ALTER TABLE "{table}" RENAME COLUMN "{old}" TO "{new}"'))


STEPS: list[Step] = [_p008_version_history, _p009_refill_maker_keys, _p010_generic_key_columns, p011_copy_flags]


def latest_version() -> int:
    return BASELINE + len(STEPS)


@functools.lru_cache(maxsize=8)
def _derived_ddl(extensions: tuple[tuple[str, int], ...]) -> tuple[tuple[str, ...], str]:
    """(DDL creating the reference schema on an empty database, its fingerprint), per set of
    installed schema extensions (the reference schema is built in memory: done once)."""
    statements = tuple(pg_schema_statements({}))
    return statements, hashlib.sha256("\n".join(statements).encode()).hexdigest()[:16]


def _existing_columns(conn) -> dict[str, set[str]]:
    existing: dict[str, set[str]] = {}
    for table, column in conn.execute(query("SELECT table_name, column_name FROM information_schema.columns "
                                            "WHERE table_schema = current_schema()")).fetchall():
        existing.setdefault(table, set()).add(column)
    return existing


def _record(conn, version: int, step: str, reference: str | None) -> None:
    conn.execute(write(f"INSERT INTO schema_version (version, applied_at, step, reference) VALUES ({POSTGRES.params(4)})"),
                 [version, utc_now_iso(), step, reference])


def migrate_pg(conn) -> int:
    """Bring a PostgreSQL database (a PgConnection) to the newest schema; returns the version."""
    wanted = {name: len(migrations) for name, migrations in schema_extensions().items()}
    _, fingerprint = _derived_ddl(tuple(wanted.items()))
    latest = latest_version()
    conn.execute(write(POSTGRES.begin))
    try:
        # A step or an index build on a big table may take longer than the statement timeout
        # every other statement has; cut half-way it would only roll back and start over.
        conn.execute(write("SET LOCAL statement_timeout = 0"))
        conn.execute(write("SELECT pg_advisory_xact_lock(hashtext('basecrawler:migrate'))"))
        conn.executescript(f"CREATE TABLE IF NOT EXISTS {EXTENSIONS_TABLE} (name TEXT PRIMARY KEY, version BIGINT NOT NULL)")
        fresh = conn.execute(query("SELECT to_regclass('schema_version')")).fetchone()[0] is None
        if fresh:
            conn.executescript("CREATE TABLE schema_version (version BIGINT NOT NULL, applied_at TEXT, step TEXT, "
                               "reference TEXT)")
            stored = None
        else:
            stored = conn.execute(query("SELECT MAX(version) FROM schema_version")).fetchone()[0]
        if stored is not None and stored > latest:
            from basecrawler.errors import ConfigError
            raise ConfigError(f"the database is at schema version {stored}, newer than this basecrawler knows "
                              f"({latest}): upgrade basecrawler")
        for number, step in enumerate(STEPS, start=BASELINE + 1):
            if stored is not None and number > stored:
                step(conn)
                _record(conn, number, step.__name__, None)
                log.info("PostgreSQL schema migrated to version %d (%s)", number, step.__name__)
        newest = None if fresh else conn.execute(query(
            "SELECT reference FROM schema_version ORDER BY version DESC LIMIT 1")).fetchone()
        seen = newest[0] if newest else None
        done = dict(conn.execute(query(f"SELECT name, version FROM {EXTENSIONS_TABLE}")).fetchall())
        behind = [name for name, n in wanted.items() if done.get(name, 0) < n]
        existing = _existing_columns(conn)
        indexes = {name: list(columns) for name, columns in conn.execute(query(PG_INDEX_COLUMNS)).fetchall()}
        # A record type dropped in (or registered in-process) after the fingerprint was taken,
        # a field added to a model, an index whose columns changed (the key gaining `source`):
        # the database is compared with the reference itself, not only with its fingerprint.
        if (fresh or seen != fingerprint or behind
                or pg_behind(reference_schema(types_only=True), existing, indexes)):
            for statement in pg_schema_statements(existing, indexes):
                conn.executescript(statement)
            if fresh or stored is None:
                _record(conn, latest, "new database (derived)", fingerprint)
            else:
                conn.execute(write("UPDATE schema_version SET reference = %s WHERE version = %s"), [fingerprint, latest])
            for name in behind:
                conn.execute(write(f"INSERT INTO {EXTENSIONS_TABLE} (name, version) VALUES (%s, %s) "
                                   "ON CONFLICT (name) DO UPDATE SET version = excluded.version"), [name, wanted[name]])
            log.debug("PostgreSQL schema derived (reference %s, extensions %s)", fingerprint, wanted)
        _switch_search_index(conn, search_index_choice())
        conn.execute(write("COMMIT"))
    except BaseException:
        if conn.in_transaction:
            conn.execute(write("ROLLBACK"))
        raise
    return latest


SEARCH_INDEX_ENV = "BASECRAWLER_PG_SEARCH_INDEX"


def search_index_choice() -> str | None:
    """BASECRAWLER_PG_SEARCH_INDEX: "windows" makes every type's search index the windows
    index (terms of 1–2 characters answered by an index too, at about twice the index cost of
    each stored record: bench/README.md), "trgm" the pg_trgm index (3+ characters; a shorter
    term is a pass over the table); unset, a store keeps the one it has and a new table gets
    the windows index, so processes that do not set it never undo a switch. Switching an
    existing store builds the index over its table once (90 s a million records)."""
    value = (os.environ.get(SEARCH_INDEX_ENV) or "").strip().lower()
    if not value:
        return None
    if value not in PG_SEARCH_INDEXES:
        from basecrawler.errors import ConfigError
        raise ConfigError(f"{SEARCH_INDEX_ENV}={value!r}: use one of {', '.join(PG_SEARCH_INDEXES)}")
    return value


def _switch_search_index(conn, kind: str | None) -> None:
    """Make `kind` the search index of every type with searched text whose table lacks it
    (an index build over the whole table, once; the other index is dropped)."""
    if kind is None:
        return
    for record_type in record_types().values():
        wanted = pg_windows_index_name(record_type) if kind == "windows" else pg_trgm_index_name(record_type)
        if not record_type.text_index_columns or \
                conn.execute(query("SELECT to_regclass(%s)"), [f'"{wanted}"']).fetchone()[0] is not None:
            continue
        log.info("building the %s search index of %s (%s=%s)", kind, record_type.table, SEARCH_INDEX_ENV, kind)
        for statement in pg_search_index_statements(record_type, kind):
            conn.executescript(statement)


__all__ = ["migrate_pg", "search_index_choice", "SEARCH_INDEX_ENV", "STEPS", "BASELINE", "latest_version"]
