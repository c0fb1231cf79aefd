"""The translate package's tables in the store, as a schema extension of the framework.

The framework runs these migrations after its own (entry point `basecrawler.schema` →
`translate.schema:MIGRATIONS` in pyproject.toml), tracks how many ran in its
`schema_extensions` table, and derives the PostgreSQL tables from them like its own; it never
imports this package. Rules as for `basecrawler/store/schema.py`: append, never edit an old one.
"""
from __future__ import annotations

import sqlite_utils


def _m001_translation_memory(db: sqlite_utils.Database) -> None:
    """`translation_memory` (translate/memory.py): each normalised source string, per language
    pair, translated once. Until issue #15 the framework's `_m001_core` created this table, so
    every database made before the move already has it: IF NOT EXISTS makes this a no-op there."""
    db["translation_memory"].create(
        {
            "source_lang": str, "target_lang": str, "source_hash": str, "source_text": str,
            "translated_text": str, "backend": str, "created_at": str, "uses": int,
        },
        pk=("source_lang", "target_lang", "source_hash"), if_not_exists=True,
    )


def _m002_translation_claims(db: sqlite_utils.Database) -> None:
    """`translation_claims` (translate/claims.py): which worker holds which row of which type's
    table, with the worker's host and pid and a lease (`claimed_at`, seconds since the epoch)
    it renews while it works. Apart from the record tables so every type shares it; replaces
    the `translation_claimed_at/_by` columns of `recalls`, which stay unused."""
    db["translation_claims"].create(
        {"tbl": str, "row_id": int, "claimed_by": str, "claimed_at": float},
        pk=("tbl", "row_id"), if_not_exists=True,
    )


MIGRATIONS = [_m001_translation_memory, _m002_translation_claims]
