"""Finding recalls: free text over original and Korean fields plus combinable filters.

Text terms of three or more characters go through the FTS5 index `recalls_fts` (trigram
tokenizer, so any Japanese, Korean or English substring of 3+ characters matches); shorter terms
(`制動`, `브레`, `AC`) cannot form a trigram and fall back to LIKE over the same columns. Several
whitespace-separated terms must all match. Everything user-supplied is bound as a parameter;
a term is quoted as one FTS5 phrase, so query syntax characters in it are plain text.

On PostgreSQL every term is one ILIKE over the searched columns joined into one text
(`schema.PG_SEARCH_DOCUMENT`), which the pg_trgm GIN index answers for terms of 3+ characters;
shorter terms scan, as the LIKE fallback does on SQLite. The filters are the same SQL on both.

`build_query()` is shared by search (a page of results) and export (a cursor over everything).

A query has at most `MAX_QUERY_TERMS` words and `MAX_QUERY_CHARS` characters (`QueryTooLarge`,
a usage error): every word adds a level to SQLite's expression tree, which refuses more than
1,000 ("Expression tree is too large"); 64 words with every filter set answer in milliseconds.
"""
from __future__ import annotations

import datetime as dt
import json
import re
import sqlite3
from dataclasses import dataclass, replace
from typing import Iterator

from .errors import ConfigError
from .manufacturers import manufacturer_key
from .schema import FTS_COLUMNS, PG_SEARCH_DOCUMENT

TRIGRAM = 3
MAX_QUERY_TERMS = 64
MAX_QUERY_CHARS = 1_000

# Newest first; id breaks ties so the order is stable between pages and exports.
ORDER_BY = "r.recall_date DESC, r.id DESC"

_YEAR_RANGE = re.compile(r"^\d{4}-\d{4}$")

# Hangul syllables and jamo: a query with any of these can only match the `_ko` columns.
_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7a3]")


@dataclass(frozen=True)
class RecallFilter:
    """What to look for. Every field is optional and they combine with AND."""

    text: str | None = None
    countries: tuple[str, ...] = ()
    manufacturer: str | None = None
    model: str | None = None
    year: int | None = None
    since: dt.date | None = None
    until: dt.date | None = None
    source: str | None = None

    def terms(self) -> list[str]:
        return (self.text or "").split()


class QueryTooLarge(ConfigError):
    """More words or characters than the search engine safely answers."""

    kind = "query_too_large"


def check_query_size(text: str | None) -> None:
    """Raise QueryTooLarge (naming the limit) for a query over MAX_QUERY_TERMS words or
    MAX_QUERY_CHARS characters."""
    text = text or ""
    words = len(text.split())
    if words > MAX_QUERY_TERMS:
        raise QueryTooLarge(f"search text has {words:,} words; the limit is {MAX_QUERY_TERMS}")
    if len(text) > MAX_QUERY_CHARS:
        raise QueryTooLarge(f"search text too long: {len(text):,} characters; the limit is {MAX_QUERY_CHARS:,}")


def _like_pattern(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def fts_phrase(term: str) -> str:
    """One FTS5 phrase holding `term` literally (quotes doubled), so `"`, `*`, `-`, `:`,
    `AND`/`OR`/`NEAR` and parentheses in user input are text, not syntax."""
    return '"' + term.replace('"', '""') + '"'


def _text_condition(term: str, params: list, dialect: str = "sqlite") -> str:
    if dialect == "postgresql":
        params.append(_like_pattern(term))
        return f"({PG_SEARCH_DOCUMENT.format(t='r.')}) ILIKE ? ESCAPE '\\'"
    if len(term) >= TRIGRAM:
        params.append(fts_phrase(term))
        return "r.id IN (SELECT rowid FROM recalls_fts WHERE recalls_fts MATCH ?)"
    pattern = _like_pattern(term)
    params.extend([pattern] * len(FTS_COLUMNS))
    return "(" + " OR ".join(f"r.[{col}] LIKE ? ESCAPE '\\'" for col in FTS_COLUMNS) + ")"


def _either_language(column: str, value: str, params: list) -> str:
    pattern = _like_pattern(value)
    params.extend([pattern, pattern])
    return f"(r.[{column}_original] LIKE ? ESCAPE '\\' OR r.[{column}_ko] LIKE ? ESCAPE '\\')"


def build_query(filters: RecallFilter, *, columns: str = "r.*", limit: int | None = None,
                offset: int = 0, ordered: bool = True, dialect: str = "sqlite") -> tuple[str, list]:
    """SQL and parameters selecting the recalls that match `filters`, newest first
    (`dialect`: "sqlite" or "postgresql", the `dialect` of the connection it will run on)."""
    check_query_size(filters.text)
    where: list[str] = []
    params: list = []
    for term in filters.terms():
        where.append(_text_condition(term, params, dialect))
    if filters.countries:
        where.append(f"r.country IN ({','.join('?' * len(filters.countries))})")
        params.extend(c.upper() for c in filters.countries)
    if filters.manufacturer:
        # The normalised key finds every spelling of the maker ("Ford Motor Company" finds FORD,
        # Ford, FORD MOTOR CO.); a substring of the published or Korean name still matches too.
        key_params: list = [manufacturer_key(filters.manufacturer)]
        either = _either_language("manufacturer", filters.manufacturer, key_params)
        where.append(f"(r.manufacturer_key = ? OR {either})")
        params.extend(key_params)
    if filters.model:
        where.append(_either_language("model", filters.model, params))
    if filters.year is not None:
        # model_year is "2021" or a range "2019-2021" (see model.year_range); a year inside
        # the range matches. Four-digit years compare correctly as text.
        year = f"{int(filters.year):04d}"
        is_range = ("r.model_year ~ '^[0-9]{4}-[0-9]{4}$'" if dialect == "postgresql" else
                    "r.model_year GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9][0-9][0-9]'")
        where.append(f"(r.model_year = ? OR ({is_range} "
                     "AND substr(r.model_year, 1, 4) <= ? AND substr(r.model_year, 6, 4) >= ?))")
        params.extend([year, year, year])
    if filters.since:
        where.append("r.recall_date >= ?")
        params.append(filters.since.isoformat())
    if filters.until:
        where.append("r.recall_date <= ?")
        params.append(filters.until.isoformat())
    if filters.source:
        where.append("r.source = ?")
        params.append(filters.source)
    sql = f"SELECT {columns} FROM recalls AS r"
    if where:
        sql += " WHERE " + " AND ".join(where)
    if ordered:
        sql += f" ORDER BY {ORDER_BY}"
    if limit is not None:
        sql += " LIMIT ? OFFSET ?"
        params.extend([int(limit), int(offset)])
    return sql, params


def iter_recalls(conn: sqlite3.Connection, filters: RecallFilter, *, limit: int | None = None
                 ) -> Iterator[tuple[list[str], Iterator[tuple]]]:
    """(column names, row tuples) straight from a cursor: rows are read one at a time, never
    collected, so callers can stream any number of them."""
    sql, params = build_query(filters, limit=limit, dialect=_dialect(conn))
    cursor = conn.execute(sql, params)
    names = [d[0] for d in cursor.description]
    return names, iter(cursor)


def search(conn: sqlite3.Connection, filters: RecallFilter, *, limit: int = 50, offset: int = 0) -> list[dict]:
    """One page of matching recalls as dicts (`extra` decoded), newest first."""
    sql, params = build_query(filters, limit=limit, offset=offset, dialect=_dialect(conn))
    cursor = conn.execute(sql, params)
    names = [d[0] for d in cursor.description]
    rows = []
    for values in cursor:
        row = dict(zip(names, values))
        if row.get("extra"):
            try:
                row["extra"] = json.loads(row["extra"])
            except ValueError:
                pass
        rows.append(row)
    return rows


def count(conn: sqlite3.Connection, filters: RecallFilter) -> int:
    sql, params = build_query(filters, columns="COUNT(*)", ordered=False, dialect=_dialect(conn))
    return conn.execute(sql, params).fetchone()[0]


def _dialect(conn) -> str:
    """"postgresql" for the store's PostgreSQL adapter, "sqlite" for a sqlite3 connection."""
    return getattr(conn, "dialect", "sqlite")


def has_korean(text: str | None) -> bool:
    return bool(text and _HANGUL.search(text))


def translation_progress(conn: sqlite3.Connection, filters: RecallFilter) -> tuple[int, int]:
    """(translated, total) among the recalls the filters select, text aside: Korean words can
    only find rows the translator has reached (`translated_at` set), so an empty Korean search
    over a half-translated store says how far translation is."""
    sql, params = build_query(replace(filters, text=None), ordered=False,
                              columns="COUNT(r.translated_at), COUNT(*)", dialect=_dialect(conn))
    translated, total = conn.execute(sql, params).fetchone()
    return translated, total


def untranslated_hint(conn: sqlite3.Connection, filters: RecallFilter) -> str | None:
    """The line to show when a Korean query found nothing while rows are still untranslated
    (None when the query has no Korean or everything is translated)."""
    if not has_korean(filters.text):
        return None
    translated, total = translation_progress(conn, filters)
    if translated >= total:
        return None
    return (f"Korean words only find translated recalls: {translated} of {total} recalls translated. "
            "Search the original language too, or run `basecrawler translate`.")


__all__ = ["RecallFilter", "build_query", "check_query_size", "QueryTooLarge", "MAX_QUERY_TERMS", "MAX_QUERY_CHARS", "iter_recalls", "search", "count", "fts_phrase", "TRIGRAM",
           "has_korean", "translation_progress", "untranslated_hint"]
