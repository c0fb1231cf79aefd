"""What the worker translates, read from the record-type declarations: for every type with
`translated` fields and a table in this store, its table, its `X_original` → `X_ko` columns, its
date (the newest-first order) and where a row's source language is. No type is named here."""
from __future__ import annotations

from dataclasses import dataclass

from basecrawler.recordtypes import RecordType, record_types
from basecrawler.store.engines.dialect import POSTGRES, SQLITE


@dataclass(frozen=True)
class Target:
    """One record type as the worker sees it."""

    name: str
    table: str
    fields: tuple[str, ...]          # translated base names ("summary", …)
    originals: tuple[str, ...]       # summary_original, …
    koreans: tuple[str, ...]         # summary_ko, …
    order: str                       # SQL expression the queue is sorted by, newest first
    has_lang: bool                   # the table has a `source_lang` column

    @classmethod
    def of(cls, record_type: RecordType) -> "Target":
        date = record_type.date_field
        # A type whose records may lack a date stores NULL there; NULL sorts first on
        # PostgreSQL and last on SQLite, so the order (and the keyset cursor) uses '' instead.
        order = f"COALESCE({date}, '')" if date else "''"
        return cls(name=record_type.name, table=record_type.table, fields=tuple(record_type.translated),
                   originals=record_type.original_columns, koreans=record_type.korean_columns,
                   order=order, has_lang="source_lang" in record_type.model.model_fields)

    def select_columns(self) -> str:
        lang = "source_lang" if self.has_lang else "NULL AS source_lang"
        return f"id, {self.order} AS sort_key, {lang}, {', '.join(self.originals)}"


def _existing_tables(store) -> set[str]:
    if store.engine == "postgresql":
        rows = store.query(POSTGRES.query(
            "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema()"))
    else:
        rows = store.query(SQLITE.query("SELECT name FROM sqlite_master WHERE type = 'table'"))
    return {row["name"] for row in rows}


def translation_targets(store) -> list[Target]:
    """Every declared type with translated fields whose table this store has, by type name."""
    tables = _existing_tables(store)
    return [Target.of(rt) for rt in record_types().values() if rt.translated and rt.table in tables]
