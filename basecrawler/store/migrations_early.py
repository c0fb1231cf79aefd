"""Migrations 1-7: the store before record types, frozen. They built the one record table
there was (`recalls`) and the bookkeeping tables, and name its columns as they were then;
today that table belongs to the vehicle_recall type and is evolved from its declaration
(recordtypes/tables.py). migrations.py runs them first, in this order; never edit one. They run
on SQLite only (PostgreSQL's schema is derived from what they make), so their statements are
SQLite's (`SQLITE.query` / `SQLITE.write`).
"""
from __future__ import annotations

import json
import logging

import sqlite_utils

from basecrawler.store.engines.dialect import SQLITE

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
    dup_keys = db.execute(SQLITE.query(
        "SELECT country, recall_number FROM recalls GROUP BY country, recall_number HAVING COUNT(*) > 1"
    )).fetchall()
    removed = 0
    for country, recall_number in dup_keys:
        rows = list(
            db.query(SQLITE.query(
                "SELECT rowid AS _rowid, * FROM recalls WHERE country = ? AND recall_number = ? "
                "ORDER BY COALESCE(updated_at, ''), rowid"),
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
        db.execute(SQLITE.write(f"UPDATE recalls SET {assignments} WHERE rowid = ?"), [*merged.values(), keep])
        db.execute(SQLITE.write(
            "DELETE FROM recalls WHERE country = ? AND recall_number = ? AND rowid != ?"),
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
    db.execute(SQLITE.write(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS recalls_fts USING fts5({cols}, "
        "content='recalls', content_rowid='id', tokenize='trigram')"
    ))
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
    db.execute(SQLITE.write("INSERT INTO recalls_fts(recalls_fts) VALUES ('rebuild')"))


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
    db.execute(SQLITE.write(f"DROP TRIGGER IF EXISTS {FTS_INSERT_TRIGGER}"))


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
    db.execute(SQLITE.write("DROP TRIGGER IF EXISTS recalls_fts_au"))
    db.execute(SQLITE.write(
        f"""CREATE TRIGGER recalls_fts_au AFTER UPDATE OF {cols} ON recalls BEGIN
          INSERT INTO recalls_fts(recalls_fts, rowid, {cols}) VALUES ('delete', old.id, {old_vals});
          INSERT INTO recalls_fts(rowid, {cols}) VALUES (new.id, {new_vals});
        END"""))


# In the order they run (migrations.MIGRATIONS continues the list).
EARLY_MIGRATIONS = [_m001_core, _m002_fts, _m003_run_counts, _m004_list_ledger, _m005_manufacturer_key,
                    _m006_fts_fed_per_batch, _m007_translation_claims]
