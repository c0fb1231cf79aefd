"""The store's numbered migrations: its history, frozen. Each is a function taking a
sqlite-utils Database, run once in order inside a transaction (schema.migrate); to change the
core schema, append one; never edit an old one.

Migrations 1-7 built the one record table of the store before record types (`recalls`) and
name its columns as they were then; today that table belongs to the vehicle_recall type and is
evolved from its declaration (recordtypes/tables.py). Migration 8 put the source into the
identity of its rows.
"""
from __future__ import annotations

import json
import logging

import sqlite_utils

log = logging.getLogger(__name__)

# These columns were the one record table of the store; today the `recalls` table is the
# vehicle_recall type's, derived from record_types/vehicle_recall.py by recordtypes/tables.py
# (ensure_types, after the numbered migrations). Spelt out here so a change of that
# declaration never changes what an old migration does.
_LEGACY_TEXT_FIELDS = ("manufacturer", "model", "component", "summary", "defect_cause", "consequence", "remedy")
ORIGINAL_COLUMNS = tuple(f"{name}_original" for name in _LEGACY_TEXT_FIELDS)
KOREAN_COLUMNS = tuple(f"{name}_ko" for name in _LEGACY_TEXT_FIELDS)

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

# Columns of recalls that the full-text index covered (original and Korean text).
_LEGACY_FTS_COLUMNS = [c for pair in zip(ORIGINAL_COLUMNS, KOREAN_COLUMNS) for c in pair]


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
    cols = ", ".join(_LEGACY_FTS_COLUMNS)
    db.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS recalls_fts USING fts5({cols}, "
        "content='recalls', content_rowid='id', tokenize='trigram')"
    )
    new_vals = ", ".join(f"new.{c}" for c in _LEGACY_FTS_COLUMNS)
    old_vals = ", ".join(f"old.{c}" for c in _LEGACY_FTS_COLUMNS)
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
    date, and which were given up (see `basecrawler/pipeline/ledger.py`)."""
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
    of the vehicle_recall type (Ford / FORD / Ford Motor Company → FORD), for facets and
    filters; manufacturer_original stays as published. Filled here for existing rows through
    the type's declaration (its `derived`, found in the registry: the framework never imports
    the rule table); the store writes it with every upsert."""
    from basecrawler.recordtypes import get_record_type
    from basecrawler.recordtypes.derived import refill_derived

    if "manufacturer_key" not in db["recalls"].columns_dict:
        db["recalls"].add_column("manufacturer_key", str)
    db["recalls"].create_index(["manufacturer_key"], if_not_exists=True)
    refill_derived(db.conn, get_record_type("vehicle_recall"), columns=("manufacturer_key",))


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
    cols = ", ".join(_LEGACY_FTS_COLUMNS)
    new_vals = ", ".join(f"new.{c}" for c in _LEGACY_FTS_COLUMNS)
    old_vals = ", ".join(f"old.{c}" for c in _LEGACY_FTS_COLUMNS)
    db.execute("DROP TRIGGER IF EXISTS recalls_fts_au")
    db.execute(
        f"""CREATE TRIGGER recalls_fts_au AFTER UPDATE OF {cols} ON recalls BEGIN
          INSERT INTO recalls_fts(recalls_fts, rowid, {cols}) VALUES ('delete', old.id, {old_vals});
          INSERT INTO recalls_fts(rowid, {cols}) VALUES (new.id, {new_vals});
        END""")


def _m008_source_in_identity(db: sqlite_utils.Database) -> None:
    """A record's identity includes its source (issue #24): two sources emitting the same
    publisher number keep two records. The `recalls` key moves from (country, recall_number)
    to (source, country, recall_number) in place — rows, translations and ids kept (a key
    with one more column cannot collide where the old one did not). The enrichment queue is
    keyed the same way, and a dead letter says which record type it was meant to be."""
    for index in db["recalls"].indexes:
        if index.unique and list(index.columns) == ["country", "recall_number"]:
            db.execute(f"DROP INDEX [{index.name}]")
    db["recalls"].create_index(["source", "country", "recall_number"], unique=True, index_name="recalls_key",
                               if_not_exists=True)
    for index in db["enrichment"].indexes:
        if index.unique and list(index.columns) == ["country", "recall_number"]:
            db.execute(f"DROP INDEX [{index.name}]")
    db["enrichment"].create_index(["source", "country", "recall_number"], unique=True, if_not_exists=True)
    if "record_type" not in db["dead_letters"].columns_dict:
        db["dead_letters"].add_column("record_type", str)


def refill_derived_columns(conn, type_name: str) -> int:
    """Recompute the derived columns of `type_name`'s stored rows from its declaration (on a
    sqlite3 or PgConnection); returns how many rows changed. The declaration is looked up
    rather than imported, so a rule table moving module keeps this working. Rows are read in
    id order pages, so a big store is never held in memory at once."""
    from basecrawler.recordtypes import get_record_type

    rt = get_record_type(type_name)
    derived = list(rt.derived_columns)
    if rt.derived is None or not derived:
        return 0
    changed, last_id = 0, 0
    while True:
        cursor = conn.execute(f"SELECT * FROM {rt.table} WHERE id > ? ORDER BY id LIMIT 1000", [last_id])
        names = [d[0] for d in cursor.description]
        rows = [dict(zip(names, values)) for values in cursor.fetchall()]
        if not rows:
            return changed
        last_id = rows[-1]["id"]
        updates = []
        for row in rows:
            fresh = rt.derived(row)
            if any(fresh.get(name) != row.get(name) for name in derived):
                updates.append([fresh.get(name) for name in derived] + [row["id"]])
        if updates:
            sets = ", ".join(f"{name} = ?" for name in derived)
            conn.executemany(f"UPDATE {rt.table} SET {sets} WHERE id = ?", updates)
            changed += len(updates)


def refill_maker_keys(conn) -> int:
    """Migration 9's work on either engine (PostgreSQL's step 9 calls it too)."""
    changed = refill_derived_columns(conn, "vehicle_recall")
    if changed:
        log.info("manufacturer keys refilled for %d stored recalls", changed)
    return changed


def _m009_refill_maker_keys(db: sqlite_utils.Database) -> None:
    """Maker names the rule table learned later (katakana ones such as フィアット → FIAT) gave
    rows stored before an unnormalised key; recompute the vehicle recalls' derived columns.
    The full-text trigger fires only for indexed columns (migration 7), so this is quick."""
    refill_maker_keys(db.conn)


# The bookkeeping tables every record type shares name a record by its key, not by the first
# type's fields (migration 10), so the framework reads the same for a product alert or a release.
GENERIC_KEY_COLUMNS = {
    "dead_letters": {"recall_number": "record_key"},
    "enrichment": {"country": "key_prefix", "recall_number": "record_key", "recall_date": "record_date"},
}
# The enrichment queue's unique key, under its old and new names (an index named after its
# columns would otherwise keep the old words).
ENRICHMENT_KEY_INDEX = ("idx_enrichment_source_country_recall_number", "idx_enrichment_source_key_prefix_record_key")


def _m010_generic_key_columns(db: sqlite_utils.Database) -> None:
    """Dead letters and the enrichment queue keep a record's key under generic names: a dead
    letter's `record_key` (the last field of the key it was meant to have), the queue's
    `key_prefix`, `record_key` and `record_date` — they held every type's key and date under
    a vehicle recall's field names. Renamed in place (ALTER TABLE … RENAME COLUMN rewrites the
    indexes that use them); the queue's key index is renamed with them."""
    for table, renames in GENERIC_KEY_COLUMNS.items():
        columns = db[table].columns_dict
        for old, new in renames.items():
            if old in columns and new not in columns:
                db.execute(f"ALTER TABLE [{table}] RENAME COLUMN [{old}] TO [{new}]")
    old_index, new_index = ENRICHMENT_KEY_INDEX
    db.execute(f"DROP INDEX IF EXISTS [{old_index}]")
    db["enrichment"].create_index(["source", "key_prefix", "record_key"], unique=True, index_name=new_index,
                                  if_not_exists=True)


def _m011_watches(db: sqlite_utils.Database) -> None:
    """Watches (issue #33): saved searches and the outbox of their deliveries
    (basecrawler/watch). A watch names what it looks for and where to deliver, never a
    secret (those come from the environment or an owner-only file). An outbox row is one
    record version for one watch, unique on (watch, type, record, version), so matching the
    same version again adds nothing and a crash between commit and send leaves it pending."""
    db["watches"].create(
        {
            "id": int, "name": str, "record_type": str, "facets": str, "text": str, "sources": str,
            "countries": str, "channel": str, "target": str, "options": str,
            "created_at": str, "updated_at": str, "checked_until": str,
        },
        pk="id", not_null={"name", "channel"}, if_not_exists=True,
    )
    db["watches"].create_index(["name"], unique=True, index_name="watches_name", if_not_exists=True)
    db["watch_outbox"].create(
        {
            "id": int, "delivery_id": str, "watch_id": int, "record_type": str, "record_id": int,
            "version": str, "change": str, "payload": str, "state": str, "attempts": int,
            "next_attempt_at": str, "claimed_at": str, "claimed_by": str, "last_error": str,
            "created_at": str, "sent_at": str,
        },
        pk="id", not_null={"delivery_id", "watch_id", "record_type", "record_id", "version", "state"},
        if_not_exists=True,
    )
    db["watch_outbox"].create_index(["watch_id", "record_type", "record_id", "version"], unique=True,
                                    index_name="watch_outbox_version", if_not_exists=True)
    db["watch_outbox"].create_index(["delivery_id"], unique=True, index_name="watch_outbox_delivery",
                                    if_not_exists=True)
    db["watch_outbox"].create_index(["state", "watch_id"], index_name="watch_outbox_state", if_not_exists=True)


def _m012_record_groups(db: sqlite_utils.Database) -> None:
    """Records that are another publisher's copy of a recall (store/groups.py): each keeps its
    own row; a group row says which one a reader sees first."""
    db["record_groups"].create(
        {"record_type": str, "member_id": int, "member_source": str, "primary_id": int, "primary_source": str},
        pk=("record_type", "member_id", "primary_source"), if_not_exists=True,
    )
    db["record_groups"].create_index(["record_type", "primary_id"], if_not_exists=True)
    db["record_groups"].create_index(["member_id", "record_type"], if_not_exists=True)


MIGRATIONS = [_m001_core, _m002_fts, _m003_run_counts, _m004_list_ledger, _m005_manufacturer_key,
              _m006_fts_fed_per_batch, _m007_translation_claims, _m008_source_in_identity,
              _m009_refill_maker_keys, _m010_generic_key_columns, _m011_watches, _m012_record_groups]




# Indexes a numbered migration dropped on SQLite: the derived PostgreSQL schema only ever adds,
# so these are named (migration 8: the enrichment queue's key without the source; migration
# 10: the same key under its old column names).
PG_DROPPED_INDEXES = ["idx_enrichment_country_recall_number", ENRICHMENT_KEY_INDEX[0]]
