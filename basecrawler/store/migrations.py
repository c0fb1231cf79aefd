"""The store's numbered migrations: its history, frozen. Each is a function taking a
sqlite-utils Database, run once in order inside a transaction (schema.migrate); to change the
core schema, append one; never edit an old one.

Migrations 1-7, from before record types, are in migrations_early.py; from migration 8 on
(which put the source into the identity of a record) they are here. Both modules name the
vehicle_recall type's old columns by design: they are history. They run on SQLite (PostgreSQL's
schema is derived from their result, schema.py), so their statements are SQLite's, except
`refill_derived_columns`, which PostgreSQL's step 9 runs too.
"""
from __future__ import annotations

import logging

import sqlite_utils

from basecrawler.store.engines.dialect import SQLITE, dialect_of
from basecrawler.store.groups_migration import m013_copy_flags
from basecrawler.store.migrations_early import EARLY_MIGRATIONS
from basecrawler.recordtypes import record_types
from basecrawler.recordtypes.statistics import analyse_unmeasured_indexes

log = logging.getLogger(__name__)


def _m008_source_in_identity(db: sqlite_utils.Database) -> None:
    """A record's identity includes its source (issue #24): two sources emitting the same
    publisher number keep two records. The `recalls` key moves from (country, recall_number)
    to (source, country, recall_number) in place — rows, translations and ids kept (a key
    with one more column cannot collide where the old one did not). The enrichment queue is
    keyed the same way, and a dead letter says which record type it was meant to be."""
    for index in db["recalls"].indexes:
        if index.unique and list(index.columns) == ["country", "recall_number"]:
            db.execute(SQLITE.write(f"DROP INDEX {SQLITE.quote(index.name)}"))
    db["recalls"].create_index(["source", "country", "recall_number"], unique=True, index_name="recalls_key",
                               if_not_exists=True)
    for index in db["enrichment"].indexes:
        if index.unique and list(index.columns) == ["country", "recall_number"]:
            db.execute(SQLITE.write(f"DROP INDEX {SQLITE.quote(index.name)}"))
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
    d = dialect_of(conn)
    while True:
        cursor = conn.execute(d.query(f"SELECT * FROM {rt.table} WHERE id > {d.p} ORDER BY id LIMIT 1000"), [last_id])
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
            sets = ", ".join(f"{name} = {d.p}" for name in derived)
            conn.executemany(d.write(f"UPDATE {rt.table} SET {sets} WHERE id = {d.p}"), updates)
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
                db.execute(SQLITE.write(f"ALTER TABLE {SQLITE.quote(table)} RENAME COLUMN {SQLITE.quote(old)} "
                                        f"TO {SQLITE.quote(new)}"))
    old_index, new_index = ENRICHMENT_KEY_INDEX
    db.execute(SQLITE.write(f"DROP INDEX IF EXISTS {SQLITE.quote(old_index)}"))
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


def _m014_measure_read_indexes(db: sqlite_utils.Database) -> None:
    """Statistics for the indexes a store gained after someone analysed it: wave 11's
    (country, shared number, source) index came without them, and SQLite's planner took it,
    guessed selective, for a country's table page (sorting all of that country's records for
    50) and for a grouped count (reading every row for its copy flag)."""
    for record_type in record_types().values():
        if db[record_type.table].exists():
            analyse_unmeasured_indexes(db.conn, record_type.table)


MIGRATIONS = [*EARLY_MIGRATIONS, _m008_source_in_identity, _m009_refill_maker_keys, _m010_generic_key_columns,
              _m011_watches, _m012_record_groups, m013_copy_flags,
              _m014_measure_read_indexes]

# Indexes a numbered migration dropped on SQLite: the derived PostgreSQL schema only ever adds,
# so these are named (migration 8: the enrichment queue's key without the source; migration
# 10: the same key under its old column names).
PG_DROPPED_INDEXES = ["idx_enrichment_country_recall_number", ENRICHMENT_KEY_INDEX[0]]
