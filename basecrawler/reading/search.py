"""Finding records of any type: free text over original and Korean fields plus combinable filters.

Everything comes from the record type's declaration (basecrawler/recordtypes): the table, the
full-text index (`<table>_fts`) and its columns, the date field, the facets. The default type
is the registry's default (vehicle recalls), so a filter without `record_type` searches the
recalls as it always did.

Several whitespace-separated terms must all match. Everything user-supplied is bound as a
parameter. SQLite reads terms from the type's FTS5 trigram index, PostgreSQL from its windows
(or pg_trgm) index; the filters are the same SQL on both.

Matching one term is search_text.py, the filters and the SQL search_query.py, what a query
may ask search_filters.py; this module plans how a query reads (which terms a page tests row
by row) and runs it: a page, a capped count, a cursor for export.
"""
from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import replace
from typing import Iterator

from cachetools import LRUCache, cached

from basecrawler.reading.search_filters import (DEFAULT_TYPE, MAX_QUERY_CHARS, MAX_QUERY_TERMS, QueryTooLarge,
                                                RecallFilter, RecordFilter, UnknownFilter, check_facets,
                                                check_query_size, columns_of)
from basecrawler.reading.search_query import build_query, facet_condition, order_by, short_terms, text_conditions
from basecrawler.reading.search_text import (TRIGRAM, dialect_of, fts_phrase, fts_table, gram_drivable, gram_indexed,
                                             gram_match, gram_trigrams, has_korean,
                                             like_pattern, pg_search_document, pg_windows_index, pg_windows_query,
                                             short_index, text_condition)
from basecrawler.recordtypes import RecordType
from basecrawler.recordtypes.declaration import DATE_UNKNOWN
from basecrawler.store import groups
from basecrawler.store.engines.dialect import SQLITE
from basecrawler.store.engines.dialect import dialect_of as engine_of

WALK_SHARE = 0.05      # a term in at least this share of the records is tested row by row …
WALK_MIN = 2_000       # … and in at least this many (a small store sorts its matches at once)
WALK_PAGE_ROWS = 1_000  # deeper pages than this collect the matches (a walk would go far)
COUNT_CAP = 10_000     # `search` counts matches up to this, then says "more than"
GRAM_DRIVE_TERMS = 64  # a count driven by a short term's trigrams ORs at most this many
SAMPLE_ROWS = 20_000   # a 1–2 character term's share is judged on the newest this many records
PG_SAMPLE_ROWS = 5_000   # … on PostgreSQL (windows index) any term's, with an ILIKE a row (`pg_walk`)
PG_COUNT_WALK_SHARE = 0.5   # a count walks the table for a term in this share (10,001 within 20,000 rows)
BEST_TEXT = "best_text"   # the display rule's line, added to search rows and exports
_dialect = dialect_of


def _run(conn, statement, params: list):
    """Run a statement built by `build_query` (search_query.py): spelled and stated for the
    connection's engine, so it runs as written on either."""
    return conn.execute(statement, params)


def _last_id(conn, record_type: RecordType) -> int:
    """The type's highest id (0 for an empty table)."""
    d = engine_of(conn)
    return conn.execute(d.query(f"SELECT max(id) FROM {d.quote(record_type.table)}")).fetchone()[0] or 0


def pg_walk(conn, filters: RecallFilter, share: float) -> frozenset[str]:
    """PostgreSQL with the windows index: the terms in at least `share` of the newest
    PG_SAMPLE_ROWS records (a plain ILIKE over them, `_newest_holding`), read
    with the ILIKE alone, wrapped, so the query walks the newest-first date index (a page of them is
    found within a few hundred rows; the index would list most of the table, then sort it).
    The planner cannot judge this itself: it takes the windows query and the ILIKE for
    independent, and has no statistics for the ILIKE's text. Only when the text is the whole
    query (another filter may make the walk long). Never changes which rows match."""
    record_type = filters.declaration()
    terms = set(filters.terms())
    if not terms or not record_type.text_index_columns or \
            _besides_text(filters):
        return frozenset()
    top = _last_id(conn, record_type)
    sample = min(PG_SAMPLE_ROWS, top)
    return frozenset(term for term in terms
                     if sample and _newest_holding(conn, record_type, term, top, PG_SAMPLE_ROWS) >= share * sample)



def indexed_search(record_type: RecordType | None) -> bool:
    """Whether `build_query` reads the type's text from its full-text index: every type that
    declares text index columns (its `<table>_fts`), not only the default one."""
    return record_type is not None and bool(record_type.text_index_columns)


def covers_table(table: str) -> bool:
    """Whether the CLI's search (`build_query`) answers a search of `table`'s records."""
    from basecrawler.recordtypes import record_types

    return any(t.table == table and indexed_search(t) for t in record_types().values())


def best_text(record_type: RecordType, row: dict) -> str | None:
    """The display rule: the line a screen shows for a record, Korean when translated, else
    the original (declared per type: "summary, else cause, else component" for vehicles)."""
    korean, original = record_type.best_text(row)
    return korean or original



def _besides_text(filters: RecallFilter) -> bool:
    """Whether the query has a filter other than its text (which may make a walk long). Showing
    every copy is none: it only leaves out a test."""
    bare = RecallFilter(record_type=filters.record_type, all_copies=filters.all_copies)
    return replace(filters, text=None) != bare


def plan_terms(conn, filters: RecallFilter) -> frozenset[str]:
    """The terms a page should test row by row while walking the newest-first index, instead
    of collecting every row that matches and sorting them.

    A term in a large share of the records (at least WALK_SHARE of them, and WALK_MIN for one
    of 3+ characters) finds a page of the newest within a few hundred rows of the walk;
    collecting and sorting its matches costs a second at a million. A rarer term is cheaper as
    a set. A term of 3+ characters is counted in its full-text index up to the threshold (the
    count stops there); a shorter one, which no index holds, by its share among the newest
    SAMPLE_ROWS records. Only when the text is the whole query: another filter may make the
    walk long. Never changes which rows match."""
    record_type = filters.declaration()
    terms = set(filters.terms())
    if _dialect(conn) != "sqlite" or not terms or not record_type.text_index_columns or \
            _besides_text(filters):
        return frozenset()
    top = _last_id(conn, record_type)
    threshold = max(WALK_MIN, int(top * WALK_SHARE))
    fts = SQLITE.quote(fts_table(record_type))
    walk = set()
    for term in terms:
        if len(term) >= TRIGRAM:
            found = conn.execute(SQLITE.query(f"SELECT count(*) FROM (SELECT 1 FROM {fts} WHERE {fts} MATCH ? LIMIT ?)"),
                                 [fts_phrase(term), threshold]).fetchone()[0]
            common = found >= threshold
        else:
            common = _common_short_term(conn, record_type, term, top)
        if common:
            walk.add(term)
    return frozenset(walk)


def _common_short_term(conn, record_type: RecordType, term: str, top: int) -> bool:
    """Whether a 1–2 character term is in at least WALK_SHARE of the newest SAMPLE_ROWS records
    (no index counts it cheaply). (Only how a term is read depends on it, never which rows match.)"""
    return _newest_holding(conn, record_type, term, top, SAMPLE_ROWS) >= WALK_SHARE * min(SAMPLE_ROWS, top)


# (connection, table, term, last id, rows) → records holding it among the newest; the web
# view's SQL threads share it (the lock guards the table, never the count).
@cached(LRUCache(256), key=lambda conn, record_type, term, top, rows: (id(conn), record_type.table, term, top, rows),
        lock=threading.Lock())
def _newest_holding(conn, record_type: RecordType, term: str, top: int, rows: int) -> int:
    """How many of the newest `rows` records (ids above `top` − rows) hold `term`, each tested
    row by row (a LIKE on SQLite, an ILIKE on PostgreSQL): a term's share where no index
    counts it cheaply. Counted once per connection and last id: a page asks for its plan,
    then its count."""
    params: list = []
    d = engine_of(conn)
    condition = text_condition(record_type, term, params, d.name, walk=True, p=d.p)
    sql = f"SELECT count(*) FROM {d.quote(record_type.table)} AS r WHERE r.id > {d.p} AND {condition}"
    return conn.execute(d.query(sql), [top - rows, *params]).fetchone()[0]


def _a_rare_facet_value(conn, filters: RecallFilter) -> bool:
    """Whether a facet filter selects fewer than WALK_SHARE of the records (counted in the
    column's index, up to that many): an export then reads its ids and sorts them; a common
    value is read walking the newest-first index, which needs no sort of every matching row
    (200,000 wide rows sorted spilled to disk: slower than the walk)."""
    record_type = filters.declaration()
    if _dialect(conn) != "sqlite":
        return False
    top = _last_id(conn, record_type)
    threshold = max(WALK_MIN, int(top * WALK_SHARE))
    for field, value in filters.facets:
        facet = record_type.facet(field)
        if facet is None or facet.multi or facet.ranged:
            continue
        params: list = []
        condition = facet_condition(record_type, field, value, params, _dialect(conn))
        # (SQLite only: the condition is in its spelling)
        found = conn.execute(SQLITE.query(f"SELECT count(*) FROM (SELECT 1 FROM {SQLITE.quote(record_type.table)} "
                                          f"AS r WHERE {condition} LIMIT ?) AS f"), [*params, threshold]).fetchone()[0]
        if found < threshold:
            return True
    return False


def iter_recalls(conn: sqlite3.Connection, filters: RecallFilter, *, limit: int | None = None
                 ) -> tuple[list[str], Iterator[tuple]]:
    """(column names, row tuples) straight from a cursor: rows are read one at a time, never
    collected, so callers can stream any number of them."""
    # A short term is tested on each row of the newest-first walk (as before plans): an export
    # streams rows in that order and never sorts a copy of them.
    grams = short_index(conn, filters.declaration())
    sql, params = build_query(filters, limit=limit, dialect=_dialect(conn), walk=short_terms(filters, grams),
                              grams=grams, facet_sets=limit is None and _a_rare_facet_value(conn, filters),
                              hide_copies=hides_copies(conn, filters))
    cursor = _run(conn, sql, params)
    names = [d[0] for d in cursor.description]
    return names, iter(cursor)


def search(conn: sqlite3.Connection, filters: RecallFilter, *, limit: int = 50, offset: int = 0) -> list[dict]:
    """One page of matching records as dicts (JSON columns decoded, `best_text` added), newest first."""
    record_type = filters.declaration()
    json_columns = [c for c in getattr(record_type, "json_columns", ("extra",))]
    grams = short_index(conn, record_type)
    if _dialect(conn) == "postgresql":
        walk = pg_walk(conn, filters, WALK_SHARE) if grams and offset + limit <= WALK_PAGE_ROWS else frozenset()
    else:
        walk = plan_terms(conn, filters) if offset + limit <= WALK_PAGE_ROWS else frozenset()
    sql, params = build_query(filters, limit=limit, offset=offset, dialect=_dialect(conn), walk=walk,
                              grams=grams, hide_copies=hides_copies(conn, filters))
    cursor = _run(conn, sql, params)
    names = [d[0] for d in cursor.description]
    rows = []
    for values in cursor:
        row = dict(zip(names, values))
        for column in json_columns:
            if isinstance(row.get(column), str) and row[column]:
                try:
                    row[column] = json.loads(row[column])
                except ValueError:
                    pass
        row[BEST_TEXT] = best_text(record_type, row)
        rows.append(row)
    return rows


def count(conn: sqlite3.Connection, filters: RecallFilter) -> int:
    grams = short_index(conn, filters.declaration())
    sql, params = build_query(filters, columns="COUNT(*)", ordered=False, dialect=_dialect(conn),
                              walk=short_terms(filters, grams), grams=grams, hide_copies=hides_copies(conn, filters))
    return _run(conn, sql, params).fetchone()[0]


def count_upto(conn, filters: RecallFilter, cap: int = COUNT_CAP) -> int:
    """The number of matching records, or `cap + 1` when there are more than `cap` (a screen
    then says "more than"): counting a million matches exactly takes longer than the page.
    The first term of 3+ characters drives the count from its index, so it stops at the cap;
    a 1–2 character term in many records is tested on each row in storage order, which finds
    the cap's worth within a few rows (its index's rows are all collected first: 0.1 s for
    200,000), a rare one read from its index."""
    record_type = filters.declaration()
    grams = short_index(conn, record_type)
    walk = short_terms(filters, grams)
    if grams and _dialect(conn) == "postgresql":
        walk = pg_walk(conn, filters, PG_COUNT_WALK_SHARE)
    elif grams and short_terms(filters) - walk:
        top = _last_id(conn, record_type)
        walk |= {t for t in short_terms(filters) - walk if _common_short_term(conn, record_type, t, top)}
    hide = hides_copies(conn, filters)
    if grams and _dialect(conn) == "sqlite" and not any(len(t) >= TRIGRAM for t in filters.terms()):
        term = next((t for t in filters.terms() if t in walk and gram_drivable(t)), None)
        if term is not None:
            found = _count_from_trigrams(conn, filters, term, frozenset(walk) - {term}, hide, cap)
            if found is not None:
                return found
    sql, params = build_query(filters, columns="1", ordered=False, dialect=_dialect(conn), driven=True,
                              walk=frozenset(walk), grams=grams, hide_copies=hide)
    return _capped(conn, sql, params, cap)


def _capped(conn, sql, params: list, cap: int) -> int:
    d = sql.dialect
    return _run(conn, d.query(f"SELECT count(*) FROM ({sql} LIMIT {d.p}) AS matched"), [*params, cap + 1]).fetchone()[0]


def _count_from_trigrams(conn, filters: RecallFilter, term: str, walk: frozenset[str], hide: bool,
                         cap: int) -> int | None:
    """`count_upto` of a query whose first common 1–2 character term is `gram_drivable`: driven
    from the index by its trigrams (search_text.py `gram_trigrams`), as a 3+ character term's
    count is, so it reads only the records holding it, in id order, and stops at the cap: a
    walk of the table read ~11 % more rows than 10,001 records when every 10th is a hidden copy.
    The trigrams are taken 1, 2, 4, … at a time: a count above the cap with some of them is one
    with all of them (each lists only records holding the term), so a term one trigram
    mostly holds costs one seek; only an exact count (at most the cap) needs them all. None
    (walk the table instead) past GRAM_DRIVE_TERMS trigrams: a long OR costs more per row."""
    trigrams: list[str] = []
    counted_at = 0
    found = 0

    def counted() -> int:
        sql, params = build_query(filters, columns="1", ordered=False, dialect="sqlite", driven=True, walk=walk,
                                  grams=True, hide_copies=hide, short_driver=(term, gram_match(trigrams)))
        return _capped(conn, sql, params, cap)

    for trigram in gram_trigrams(conn, filters.declaration(), term):
        trigrams.append(trigram)
        if len(trigrams) > GRAM_DRIVE_TERMS:
            return None
        if len(trigrams) & (len(trigrams) - 1) == 0:
            found, counted_at = counted(), len(trigrams)
            if found > cap:
                return found
    if not trigrams:
        return None
    return found if counted_at == len(trigrams) else counted()


def count_by_source(conn, record_type: RecordType) -> dict[str, int]:
    """Records of the type per source (sources with none are absent)."""
    d = engine_of(conn)
    return {source: n for source, n in conn.execute(d.query(
        f"SELECT source, COUNT(*) FROM {d.quote(record_type.table)} GROUP BY source ORDER BY source")).fetchall()}


def date_unknown_by_source(conn, record_type: RecordType) -> dict[str, int]:
    """Records of the type stored without a known date, per source (sources with none are
    absent; {} for a type whose records always have one)."""
    if not record_type.has_date_unknown:
        return {}
    d = engine_of(conn)
    return {source: n for source, n in conn.execute(d.query(
        f"SELECT source, COUNT(*) FROM {d.quote(record_type.table)} WHERE {d.quote(DATE_UNKNOWN)} = 1 "
        "GROUP BY source ORDER BY source")).fetchall()}


def counts_by_type(conn) -> dict[str, dict[str, int]]:
    """Type name → source → records, for every declared type (in name order)."""
    from basecrawler.recordtypes import record_types

    return {name: count_by_source(conn, record_type) for name, record_type in record_types().items()}


def hides_copies(conn, filters: RecallFilter) -> bool:
    """Whether a query must leave out other publishers' copies: unless every copy is asked for,
    when any record of the type is linked as one (asked each time: a run may have linked some)."""
    return not filters.all_copies and groups.has_copies(conn, filters.declaration())


def _dialect(conn) -> str:
    """"postgresql" for the store's PostgreSQL adapter, "sqlite" for a sqlite3 connection."""
    return getattr(conn, "dialect", "sqlite")



def translation_progress(conn: sqlite3.Connection, filters: RecallFilter) -> tuple[int, int]:
    """(translated, total) among the records the filters select, text aside: Korean words can
    only find rows the translator has reached (`translated_at` set), so an empty Korean search
    over a half-translated store says how far translation is."""
    sql, params = build_query(replace(filters, text=None), ordered=False,
                              columns="COUNT(r.translated_at), COUNT(*)", dialect=_dialect(conn))
    translated, total = _run(conn, sql, params).fetchone()
    return translated, total


def untranslated_hint(conn: sqlite3.Connection, filters: RecallFilter) -> str | None:
    """The line to show when a Korean query found nothing while rows are still untranslated
    (None when the query has no Korean or everything is translated)."""
    if not has_korean(filters.text):
        return None
    translated, total = translation_progress(conn, filters)
    if translated >= total:
        return None
    noun = filters.declaration().title.lower()
    return (f"Korean words only find translated {noun}: {translated} of {total} {noun} translated. "
            "Search the original language too, or run `basecrawler translate`.")


__all__ = ["RecallFilter", "RecordFilter", "build_query", "like_pattern", "check_query_size", "check_facets", "QueryTooLarge",
           "UnknownFilter", "MAX_QUERY_TERMS", "MAX_QUERY_CHARS", "iter_recalls", "search", "count", "best_text",
           "fts_phrase", "TRIGRAM", "BEST_TEXT", "DEFAULT_TYPE", "has_korean", "translation_progress",
           "untranslated_hint", "plan_terms", "short_terms", "short_index", "gram_indexed", "pg_windows_index", "pg_windows_query", "pg_walk", "text_conditions", "count_upto", "COUNT_CAP", "count_by_source", "counts_by_type", "date_unknown_by_source", "order_by", "fts_table", "pg_search_document", "columns_of", "indexed_search",
           "covers_table"]
