"""Database schema and its numbered migrations (tracked in `PRAGMA user_version`).

Each migration is a function taking a sqlite-utils Database, run once in order inside a
transaction. To change the schema, append a function to MIGRATIONS; never edit an old one.

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
import json
import logging
from collections.abc import Callable, Sequence

import sqlite_utils

from .model import KOREAN_COLUMNS, ORIGINAL_COLUMNS

log = logging.getLogger(__name__)

RECALL_COLUMNS: dict[str, type] = {
    "source": str,
    "country": str,
    "recall_number": str,
    "recall_date": str,
    "date_unknown": int,
    **{name: str for pair in zip(ORIGINAL_COLUMNS, KOREAN_COLUMNS) for name in pair},
    "model_year": str,
    "affected_units": int,
    "source_lang": str,
    "source_url": str,
    "extra": str,
    "first_seen_at": str,
    "updated_at": str,
    "translated_at": str,
    "translation_status": str,
    "translation_note": str,
}

# Columns of recalls that the full-text index covers (original and Korean text).
FTS_COLUMNS = [c for pair in zip(ORIGINAL_COLUMNS, KOREAN_COLUMNS) for c in pair]


def _has_unique_key(db: sqlite_utils.Database) -> bool:
    for index in db["recalls"].indexes:
        if index.unique and list(index.columns) == ["country", "recall_number"]:
            return True
    return False


def merge_duplicate_recalls(db: sqlite_utils.Database) -> int:
    """Fold rows sharing (country, recall_number) into one: newest non-null value wins.

    Older databases had no UNIQUE index, so re-crawls could insert the same recall twice.
    Rows are ordered oldest → newest by (updated_at, rowid); each column keeps the newest
    non-null value (COALESCE, newest wins), `first_seen_at` keeps the oldest. Returns the
    number of rows removed.
    """
    columns = [c for c in db["recalls"].columns_dict if c != "id"]
    dup_keys = db.execute(
        "SELECT country, recall_number FROM recalls GROUP BY country, recall_number HAVING COUNT(*) > 1"
    ).fetchall()
    removed = 0
    for country, recall_number in dup_keys:
        rows = list(
            db.query(
                "SELECT rowid AS _rowid, * FROM recalls WHERE country = ? AND recall_number = ? "
                "ORDER BY COALESCE(updated_at, ''), rowid",
                [country, recall_number],
            )
        )
        merged: dict = {}
        for row in rows:
            for col in columns:
                value = row.get(col)
                if value is None or value == "":
                    continue
                if col == "first_seen_at" and merged.get(col):
                    continue
                if col == "extra" and merged.get("extra"):
                    try:
                        value = json.dumps({**json.loads(merged["extra"]), **json.loads(value)}, ensure_ascii=False)
                    except (ValueError, TypeError):
                        pass
                merged[col] = value
        keep = rows[-1]["_rowid"]
        assignments = ", ".join(f"[{c}] = ?" for c in merged)
        db.execute(f"UPDATE recalls SET {assignments} WHERE rowid = ?", [*merged.values(), keep])
        db.execute(
            "DELETE FROM recalls WHERE country = ? AND recall_number = ? AND rowid != ?",
            [country, recall_number, keep],
        )
        removed += len(rows) - 1
    return removed


def _m001_core(db: sqlite_utils.Database) -> None:
    if "recalls" not in db.table_names():
        db["recalls"].create({"id": int, **RECALL_COLUMNS}, pk="id", not_null={"source", "country", "recall_number", "recall_date"})
    else:
        # An older database: add any missing columns, then merge duplicates before the index.
        existing = db["recalls"].columns_dict
        for name, kind in RECALL_COLUMNS.items():
            if name not in existing:
                db["recalls"].add_column(name, kind)
        if not _has_unique_key(db):
            removed = merge_duplicate_recalls(db)
            if removed:
                log.warning("migrated an old database: merged %d duplicate recall rows", removed)
    if not _has_unique_key(db):
        db["recalls"].create_index(["country", "recall_number"], unique=True, index_name="recalls_key")
    db["recalls"].create_index(["source", "recall_date"], if_not_exists=True)
    db["recalls"].create_index(["translated_at"], if_not_exists=True)

    db["crawl_runs"].create(
        {
            "id": int, "source": str, "mode": str, "status": str, "pid": int,
            "started_at": str, "finished_at": str, "duration_s": float,
            "since": str, "until": str,
            "fetched": int, "parsed": int, "out_of_range": int, "saved": int,
            "new": int, "updated": int, "unchanged": int,
            "unparseable": int, "dead_lettered": int,
            "http_stats": str, "enrichment_stats": str, "error": str, "summary": str,
        },
        pk="id", if_not_exists=True,
    )
    db["crawl_runs"].create_index(["source", "id"], if_not_exists=True)

    db["dead_letters"].create(
        {
            "id": int, "source": str, "run_id": int, "stage": str, "kind": str, "error": str,
            "recall_number": str, "url": str, "response_sha256": str,
            "raw_kind": str, "raw": str, "raw_bytes": bytes,
            "created_at": str, "retried_at": str, "resolved_at": str, "retry_count": int,
        },
        pk="id", if_not_exists=True,
    )
    db["dead_letters"].create_index(["source", "resolved_at"], if_not_exists=True)

    db["enrichment"].create(
        {
            "id": int, "source": str, "country": str, "recall_number": str,
            "recall_date": str, "state": str, "level": int, "attempts": int,
            "transient_failures": int, "next_attempt_at": str, "claimed_at": str,
            "last_error": str, "created_at": str, "updated_at": str,
        },
        pk="id", if_not_exists=True,
    )
    db["enrichment"].create_index(["country", "recall_number"], unique=True, if_not_exists=True)
    db["enrichment"].create_index(["source", "state", "next_attempt_at"], if_not_exists=True)

    db["responses"].create(
        {
            "id": int, "url": str, "method": str, "status": int, "content_type": str,
            "etag": str, "last_modified": str, "sha256": str, "size": int, "fetched_at": str,
        },
        pk="id", if_not_exists=True,
    )
    db["responses"].create_index(["url", "id"], if_not_exists=True)
    db["responses"].create_index(["sha256"], if_not_exists=True)

    db["artifacts"].create(
        {
            "target_key": str, "source": str, "url": str, "etag": str, "last_modified": str,
            "content_length": int, "sha256": str, "path": str, "state": str,
            "attempts": int, "last_attempt_at": str, "error": str, "updated_at": str,
        },
        pk="target_key", if_not_exists=True,
    )

    # `translation_memory` was created here until its schema moved to the translate package
    # (translate/schema.py, a schema extension; issue #15). Dropping it from this old migration
    # is safe: a database already past version 1 has the table, and the extension's first
    # migration (CREATE TABLE IF NOT EXISTS, same columns and key) leaves it as it is.

    db["meta"].create({"key": str, "value": str, "updated_at": str}, pk="key", if_not_exists=True)


def _m002_fts(db: sqlite_utils.Database) -> None:
    """FTS5 with the trigram tokenizer so Japanese and Korean substrings match.

    An external-content index over recalls kept in step by triggers (insert / update / delete),
    so upserts and the translation worker need no extra code to keep search current.
    """
    cols = ", ".join(FTS_COLUMNS)
    db.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS recalls_fts USING fts5({cols}, "
        "content='recalls', content_rowid='id', tokenize='trigram')"
    )
    new_vals = ", ".join(f"new.{c}" for c in FTS_COLUMNS)
    old_vals = ", ".join(f"old.{c}" for c in FTS_COLUMNS)
    db.executescript(
        f"""
        CREATE TRIGGER IF NOT EXISTS recalls_fts_ai AFTER INSERT ON recalls BEGIN
          INSERT INTO recalls_fts(rowid, {cols}) VALUES (new.id, {new_vals});
        END;
        CREATE TRIGGER IF NOT EXISTS recalls_fts_ad AFTER DELETE ON recalls BEGIN
          INSERT INTO recalls_fts(recalls_fts, rowid, {cols}) VALUES ('delete', old.id, {old_vals});
        END;
        CREATE TRIGGER IF NOT EXISTS recalls_fts_au AFTER UPDATE ON recalls BEGIN
          INSERT INTO recalls_fts(recalls_fts, rowid, {cols}) VALUES ('delete', old.id, {old_vals});
          INSERT INTO recalls_fts(rowid, {cols}) VALUES (new.id, {new_vals});
        END;
        """
    )
    db.execute("INSERT INTO recalls_fts(recalls_fts) VALUES ('rebuild')")


def _m003_run_counts(db: sqlite_utils.Database) -> None:
    """Counts that make the run line add up (issue #13 point 5): records merged into another
    of the same run, items skipped by design (with reason counts as JSON), store failures."""
    existing = db["crawl_runs"].columns_dict
    for name, kind in (("merged", int), ("skipped", int), ("skip_reasons", str), ("store_failed", int)):
        if name not in existing:
            db["crawl_runs"].add_column(name, kind)


def _m004_list_ledger(db: sqlite_utils.Database) -> None:
    """Per-source ledger of list items (EU weekly reports, MLIT press releases, AU recalls):
    which ones were processed, which keep failing and will be fetched again whatever their
    date, and which were given up (see `basecrawler/ledger.py`)."""
    db["list_ledger"].create(
        {
            "source": str, "key": str, "url": str, "listed_date": str, "data": str, "state": str,
            "attempts": int, "last_error": str, "last_attempt_at": str, "first_seen_at": str,
            "last_seen_at": str, "done_at": str,
            "letters": str,   # JSON ids of the fetch dead letters of its failed attempts
        },
        pk=("source", "key"), if_not_exists=True,
    )
    db["list_ledger"].create_index(["source", "state"], if_not_exists=True)


FTS_INSERT_TRIGGER = "recalls_fts_ai"


def _m006_fts_fed_per_batch(db: sqlite_utils.Database) -> None:
    """New rows reach recalls_fts with one INSERT … SELECT per upsert batch (store.py), not a
    trigger per row: same index, about three times faster to build (bench/README.md).

    Only the insert trigger goes: updates (the translation worker, upserts of changed rows) and
    deletes keep theirs, so no other writer has to know about the index. The store is the only
    module that inserts recalls; a script inserting rows by hand must feed recalls_fts itself
    (or run `INSERT INTO recalls_fts(recalls_fts) VALUES ('rebuild')`)."""
    db.execute(f"DROP TRIGGER IF EXISTS {FTS_INSERT_TRIGGER}")


def _m005_manufacturer_key(db: sqlite_utils.Database) -> None:
    """`recalls.manufacturer_key`: the published manufacturer normalised by the rule table in
    basecrawler/manufacturers.py (Ford / FORD / Ford Motor Company → FORD), for facets and
    filters; manufacturer_original stays as published. Filled here for existing rows; the store
    writes it with every upsert."""
    from .manufacturers import refill_manufacturer_keys

    if "manufacturer_key" not in db["recalls"].columns_dict:
        db["recalls"].add_column("manufacturer_key", str)
    db["recalls"].create_index(["manufacturer_key"], if_not_exists=True)
    refill_manufacturer_keys(db.conn)


def _m007_translation_claims(db: sqlite_utils.Database) -> None:
    """Translation workers claim their batch (`translation_claimed_at`, `_by`) before calling
    the backend, so several workers on one store never send the same row twice (on
    PostgreSQL the claim takes its rows with FOR UPDATE SKIP LOCKED). A claim older than the
    processing timeout belongs to a worker that died and is taken again."""
    existing = db["recalls"].columns_dict
    for name in ("translation_claimed_at", "translation_claimed_by"):
        if name not in existing:
            db["recalls"].add_column(name, str)
    # Claiming a row must not rewrite its full-text entry: the update trigger now fires only
    # when an indexed column changes.
    cols = ", ".join(FTS_COLUMNS)
    new_vals = ", ".join(f"new.{c}" for c in FTS_COLUMNS)
    old_vals = ", ".join(f"old.{c}" for c in FTS_COLUMNS)
    db.execute("DROP TRIGGER IF EXISTS recalls_fts_au")
    db.execute(
        f"""CREATE TRIGGER recalls_fts_au AFTER UPDATE OF {cols} ON recalls BEGIN
          INSERT INTO recalls_fts(recalls_fts, rowid, {cols}) VALUES ('delete', old.id, {old_vals});
          INSERT INTO recalls_fts(rowid, {cols}) VALUES (new.id, {new_vals});
        END""")


MIGRATIONS = [_m001_core, _m002_fts, _m003_run_counts, _m004_list_ledger, _m005_manufacturer_key,
              _m006_fts_fed_per_batch, _m007_translation_claims]


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
    row = db.execute(f"SELECT version FROM {EXTENSIONS_TABLE} WHERE name = ?", [name]).fetchone()
    return row[0] if row else 0


def _migrate_extension(db: sqlite_utils.Database, name: str, migrations: Sequence[Migration]) -> int:
    version = _extension_version(db, name)
    for number, migration in enumerate(migrations, start=1):
        if number <= version:
            continue
        db.conn.execute("BEGIN IMMEDIATE")
        try:
            # Read the version again under the write lock (another process may have got there).
            ran = number > _extension_version(db, name)
            if ran:
                db.execute(f"CREATE TABLE IF NOT EXISTS {EXTENSIONS_TABLE} "
                           "(name TEXT PRIMARY KEY, version INTEGER NOT NULL)")
                migration(db)
                db.execute(f"INSERT INTO {EXTENSIONS_TABLE} (name, version) VALUES (?, ?) "
                           "ON CONFLICT(name) DO UPDATE SET version = excluded.version", [name, number])
            db.conn.execute("COMMIT")
        except BaseException:
            db.conn.execute("ROLLBACK")
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
# reaches PostgreSQL with no second migration to write. What SQLite does with FTS5 and
# triggers, PostgreSQL does with one pg_trgm GIN index over the searched text (PG_EXTRAS).

_PG_TYPES = {"TEXT": "TEXT", "INTEGER": "BIGINT", "FLOAT": "DOUBLE PRECISION", "REAL": "DOUBLE PRECISION",
             "BLOB": "BYTEA", "": "TEXT"}

# The text `search` looks in, one expression (searched terms never hold whitespace, so joining
# the columns with a space cannot make a match across two of them). search.py uses this very
# expression, so PostgreSQL answers ILIKE '%term%' from the trigram index.
PG_SEARCH_DOCUMENT = " || ' ' || ".join(f"COALESCE({{t}}{c}, '')" for c in FTS_COLUMNS)

PG_EXTRAS = [
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    f"CREATE INDEX IF NOT EXISTS recalls_search_trgm ON recalls USING gin (({PG_SEARCH_DOCUMENT.format(t='')}) gin_trgm_ops)",
    # The translation queue (pending rows newest first) and the claim lookup.
    "CREATE INDEX IF NOT EXISTS recalls_pending ON recalls (recall_date DESC, id DESC) WHERE translated_at IS NULL",
]


def _pg_type(kind: str) -> str:
    base, _, rest = kind.partition(" ")
    return _PG_TYPES.get(base, "TEXT") + (" " + rest if rest else "")


def reference_schema() -> dict[str, dict]:
    """{table: {"columns": [(name, type)], "pk": [names], "indexes": [(name, unique, [cols])]}}
    of a SQLite database at the newest version, schema extensions included (FTS tables and the
    extension bookkeeping left out)."""
    import sqlite3

    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        migrate(sqlite_utils.Database(conn))
        tables = {}
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                                    "AND name NOT LIKE 'recalls_fts%' AND name != ? ORDER BY name", [EXTENSIONS_TABLE]):
            info = conn.execute(f"PRAGMA table_info([{name}])").fetchall()
            indexes = []
            for _, index, unique, origin, _ in conn.execute(f"PRAGMA index_list([{name}])").fetchall():
                if origin == "pk":
                    continue
                cols = [r[2] for r in conn.execute(f"PRAGMA index_info([{index}])").fetchall()]
                indexes.append((index, bool(unique), cols))
            tables[name] = {
                "columns": [(r[1], (r[2] or "").upper() + (" NOT NULL" if r[3] else "")) for r in info],
                "pk": [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]],
                "indexes": indexes,
            }
        return tables
    finally:
        conn.close()


def pg_schema_statements(existing: dict[str, set[str]]) -> list[str]:
    """DDL bringing a PostgreSQL database with these {table: columns} to the reference schema."""
    statements = []
    for table, spec in reference_schema().items():
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
            statements.append(f'CREATE {"UNIQUE " if unique else ""}INDEX IF NOT EXISTS "{index}" ON "{table}" '
                              f'({", ".join(chr(34) + c + chr(34) for c in cols)})')
    return statements + PG_EXTRAS


def migrate(db: sqlite_utils.Database) -> int:
    """Bring the database to the newest schema: the core migrations, then those of each schema
    extension not applied yet; returns the core version reached."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    for number, migration in enumerate(MIGRATIONS, start=1):
        if number <= version:
            continue
        db.conn.execute("BEGIN IMMEDIATE")
        # Read the version again under the write lock: another process opening the same new
        # database may have migrated it while we waited.
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if number <= version:
            db.conn.execute("COMMIT")
            continue
        try:
            migration(db)
            db.conn.execute(f"PRAGMA user_version = {number}")
            db.conn.execute("COMMIT")
        except BaseException:
            db.conn.execute("ROLLBACK")
            raise
        log.debug("schema migrated to version %d (%s)", number, migration.__name__)
        version = number
    for name, migrations in schema_extensions().items():
        _migrate_extension(db, name, migrations)
    return version
