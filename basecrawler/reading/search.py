"""Finding records of any type: free text over original and Korean fields plus combinable filters.

Everything comes from the record type's declaration (basecrawler/recordtypes): the table, the
full-text index (`<table>_fts`) and its columns, the date field, the facets. The default type
is the registry's default (vehicle recalls), so a filter without `record_type` searches the
recalls as it always did.

Text terms of three or more characters go through the type's FTS5 index (trigram tokenizer,
so any Japanese, Korean or English substring of 3+ characters matches); shorter terms
(`制動`, `브레`, `AC`) cannot form a trigram and fall back to LIKE over the same columns. Several
whitespace-separated terms must all match. Everything user-supplied is bound as a parameter;
a term is quoted as one FTS5 phrase, so query syntax characters in it are plain text.

On PostgreSQL every term is one ILIKE over the searched columns joined into one text. The
type's windows index (tables.py `pg_windows_document`) answers terms of every length, each
candidate tested with the same ILIKE (`_pg_text_condition`); a store that keeps the pg_trgm
index (made before the windows index, or BASECRAWLER_PG_SEARCH_INDEX=trgm) answers terms of
3+ characters from it, and shorter terms scan.
The filters are the same SQL on both.

Filters: `--filter FIELD=VALUE` on any declared facet (case-insensitive equality; a
multi-valued facet, stored as a JSON list, matches when any of its values does); the options
people already use (`--country`, `--manufacturer`, `--model`, `--year`, `--since/--until`)
apply to any type that has the columns they read, and are a usage error on one that has not.

A query has at most `MAX_QUERY_TERMS` words and `MAX_QUERY_CHARS` characters (`QueryTooLarge`,
a usage error): every word adds a level to SQLite's expression tree, which refuses more than
1,000 ("Expression tree is too large"); 64 words with every filter set answer in milliseconds.

`build_query()` is shared by search (a page of results) and export (a cursor over everything).
"""
from __future__ import annotations

import datetime as dt
import json
import re
import sqlite3
import weakref
from dataclasses import dataclass, replace
from typing import Iterator

from basecrawler.errors import ConfigError
from basecrawler.store import groups
from basecrawler.recordtypes import RecordType, get_record_type
from basecrawler.recordtypes.declaration import DATE_UNKNOWN
from basecrawler.recordtypes.registry import DEFAULT_RECORD_TYPE
from basecrawler.recordtypes.tables import (PAD, PG_LONG_TEXT, attach_fts_vocab, fts_padded, fts_vocab_table,
                                            pg_windows_document, pg_windows_index_name)
from basecrawler.recordtypes.tables import pg_search_document as tables_pg_search_document

TRIGRAM = 3
WALK_SHARE = 0.05      # a term in at least this share of the records is tested row by row …
WALK_MIN = 2_000       # … and in at least this many (a small store sorts its matches at once)
WALK_PAGE_ROWS = 1_000  # deeper pages than this collect the matches (a walk would go far)
COUNT_CAP = 10_000     # `search` counts matches up to this, then says "more than"
SAMPLE_ROWS = 20_000   # a 1–2 character term's share is judged on the newest this many records
PG_SAMPLE_ROWS = 5_000   # … on PostgreSQL (windows index) any term's, with an ILIKE a row (`pg_walk`)
PG_COUNT_WALK_SHARE = 0.5   # a count walks the table for a term in this share (10,001 within 20,000 rows)
MAX_QUERY_TERMS = 64
MAX_QUERY_CHARS = 1_000
DEFAULT_TYPE = DEFAULT_RECORD_TYPE
BEST_TEXT = "best_text"   # the display rule's line, added to search rows and exports

_YEAR_RANGE = re.compile(r"^\d{4}-\d{4}$")

# Hangul syllables and jamo: a query with any of these can only match the `_ko` columns.
_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7a3]")


@dataclass(frozen=True)
class RecallFilter:
    """What to look for, in records of `record_type`. Every field is optional and they
    combine with AND. `facets`: (field, value) pairs, each a declared facet of the type."""

    text: str | None = None
    countries: tuple[str, ...] = ()
    manufacturer: str | None = None
    model: str | None = None
    year: int | None = None
    since: dt.date | None = None
    until: dt.date | None = None
    source: str | None = None
    record_type: str = DEFAULT_TYPE
    facets: tuple[tuple[str, str], ...] = ()
    # Another publisher's copy of a recall (store/groups.py) is shown inside its group, not as a
    # record of its own, unless every copy is asked for (`--all-copies`).
    all_copies: bool = False

    def terms(self) -> list[str]:
        return (self.text or "").split()

    def declaration(self) -> RecordType:
        return get_record_type(self.record_type)


RecordFilter = RecallFilter   # the same thing under a name that does not say "recall"


class QueryTooLarge(ConfigError):
    """More words or characters than the search engine safely answers."""

    kind = "query_too_large"


class UnknownFilter(ConfigError):
    """A filter the record type cannot answer: an undeclared facet, or an option reading a
    column the type does not have."""

    kind = "unknown_filter"


def check_query_size(text: str | None) -> None:
    """Raise QueryTooLarge (naming the limit) for a query over MAX_QUERY_TERMS words or
    MAX_QUERY_CHARS characters."""
    text = text or ""
    words = len(text.split())
    if words > MAX_QUERY_TERMS:
        raise QueryTooLarge(f"search text has {words:,} words; the limit is {MAX_QUERY_TERMS}")
    if len(text) > MAX_QUERY_CHARS:
        raise QueryTooLarge(f"search text too long: {len(text):,} characters; the limit is {MAX_QUERY_CHARS:,}")


def check_facets(record_type: RecordType, facets) -> None:
    """Every (field, value) must name a declared facet of the type (UnknownFilter lists them)."""
    for field, _ in facets:
        if record_type.facet(field) is None:
            known = ", ".join(f.field for f in record_type.facets) or "none"
            raise UnknownFilter(f"{record_type.name} has no facet {field!r}; facets: {known}")


def columns_of(record_type: RecordType) -> set[str]:
    """The columns of the type's table (the data, the Korean beside each original)."""
    return {"id", *record_type.data_columns, *record_type.korean_columns}


def fts_table(record_type: RecordType) -> str:
    return f"{record_type.table}_fts"


def order_by(record_type: RecordType) -> str:
    """Newest first; id breaks ties so the order is stable between pages and exports. Records
    without a date (NULL) come after every dated one."""
    if record_type.date_field is None:
        return "r.id DESC"
    nulls = " NULLS LAST" if record_type.date_sentinel is None else ""
    return f"r.[{record_type.date_field}] DESC{nulls}, r.id DESC"


def like_pattern(text: str) -> str:
    """The LIKE pattern of a term: the term anywhere, its wildcards (and the escape) literal."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def fts_phrase(term: str) -> str:
    """One FTS5 phrase holding `term` literally (quotes doubled), so `"`, `*`, `-`, `:`,
    `AND`/`OR`/`NEAR` and parentheses in user input are text, not syntax."""
    return '"' + term.replace('"', '""') + '"'


def pg_search_document(record_type: RecordType, alias: str = "r.") -> str:
    """The text PostgreSQL searches, on table `alias`: the very expression the type's search
    index is built on (tables.py), so the index answers it."""
    return tables_pg_search_document(record_type).format(t=alias)


def gram_indexed(term: str) -> bool:
    """Whether the padded trigram index's vocabulary can list the rows holding a 1–2 character
    `term` (`short_index`): its letters are ASCII, or have no case (Japanese, Korean, digits,
    signs). FTS5 folds every letter to lower case and LIKE only ASCII ones, so for such a term
    the index's spelling of any text LIKE matches is the term in ASCII lower case. A term with
    another cased letter (ö, Ｑ) is read by a pass over the table, as before."""
    return len(term) < TRIGRAM and PAD[0] not in term and all(
        ch.isascii() or (ch.lower() == ch and ch.upper() == ch and ch.casefold() == ch) for ch in term)


def _gram_range(term: str) -> tuple[str, str]:
    """The vocabulary's trigrams that start with `term` (ASCII-lower-cased, as the index holds
    it): every one from the term itself to the term followed by the highest code points."""
    low = "".join(ch.lower() if ch.isascii() else ch for ch in term)
    return low, low + "\U0010ffff" * (TRIGRAM - len(term))


_short_indexes: dict[tuple, int] = {}   # (connection, table) → the schema version its padded index was seen at


def short_index(conn, record_type: RecordType) -> bool:
    """Whether the type's SQLite full-text index is the padded one (tables.py), whose
    vocabulary lists the rows holding any 1–2 character string; if so the connection gets
    its temporary vocabulary table, which queries built with `grams` read. Looked up in the
    schema once per connection and schema version (a page asks several times). On PostgreSQL:
    whether the type's table has the windows index (`pg_windows_index`)."""
    if _dialect(conn) == "postgresql":
        return bool(record_type.text_index_columns) and pg_windows_index(conn, record_type)
    if _dialect(conn) != "sqlite" or not record_type.text_index_columns:
        return False
    key = (id(conn), record_type.table)
    version = conn.execute("PRAGMA schema_version").fetchone()[0]
    if _short_indexes.get(key) == version and conn.execute(
            "SELECT 1 FROM temp.sqlite_master WHERE name = ?", [fts_vocab_table(record_type)]).fetchone():
        return True   # (the vocabulary on this very connection: an id reused by another has none)
    if not fts_padded(conn, record_type):
        return False
    attach_fts_vocab(conn, record_type)
    if len(_short_indexes) >= 256:
        _short_indexes.pop(next(iter(_short_indexes), None), None)   # (threads of the web view share it)
    _short_indexes[key] = version
    return True


_pg_windows: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # connection → {table: index there}


def pg_windows_index(conn, record_type: RecordType) -> bool:
    """Whether the type's PostgreSQL table has the windows index (tables.py
    `pg_windows_document`; a store may keep pg_trgm in its place), asked once per
    connection. Either answer only chooses how a term is read, never which rows match."""
    known = _pg_windows.setdefault(conn, {})
    if record_type.table not in known:
        found = conn.execute("SELECT to_regclass(?)", [f'"{pg_windows_index_name(record_type)}"']).fetchone()[0]
        known[record_type.table] = found is not None
    return known[record_type.table]


_CONTEXT_CASED = frozenset("Σσς")


def pg_windows_query(term: str) -> str | None:
    """The tsquery (as text, to be lower-cased by PostgreSQL as the index's text was) that
    every record whose text ILIKE-matches `term` satisfies in the windows index: each
    3-character window of the term, or for a 1–2 character term a prefix of a window (every
    1–2 characters of an indexed text start one); or a record too long to be indexed whole.
    `'` and `\\` become `?`, as in the index. None for a term with a character whose lower
    case is longer than one character (İ), or depends on its neighbours (Σ, final ς under an
    ICU collation): its windows, lower-cased alone, might not be the lower-cased text's."""
    if not term or any(len(ch.lower()) != 1 or ch in _CONTEXT_CASED for ch in term):
        return None
    text = term.translate({ord("'"): "?", ord("\\"): "?"})
    if len(text) < TRIGRAM:
        wanted = f"'{text}':*"
    else:
        wanted = "(" + " & ".join(f"'{w}'" for w in dict.fromkeys(text[i:i + TRIGRAM] for i in range(len(text) - 2))) + ")"
    return f"{wanted} | '{PG_LONG_TEXT}'"


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
            replace(filters, text=None) != replace(RecallFilter(record_type=filters.record_type), text=None):
        return frozenset()
    top = conn.execute(f"SELECT max(id) FROM {record_type.table}").fetchone()[0] or 0
    sample = min(PG_SAMPLE_ROWS, top)
    return frozenset(term for term in terms
                     if sample and _newest_holding(conn, record_type, term, top, PG_SAMPLE_ROWS) >= share * sample)


def _pg_text_condition(record_type: RecordType, term: str, params: list, alias: str, windows: bool,
                       walk: bool, as_ids: bool = True) -> str:
    """PostgreSQL: the ILIKE over the searched text (which the pg_trgm index answers for 3+
    characters). With the windows index and unless `walk` (`pg_walk`), the ids of the rows
    its tsquery finds, each tested with the ILIKE — exactly the ILIKE's rows, for terms of any
    length — collected first (an array the query then reads by id), so the planner cannot
    walk the date index testing each row: it takes the windows query and the ILIKE for
    independent, underestimates how many rows hold a term, and walked a million rows for
    `Q7` (1.2 s), also when the ids were written as `IN (SELECT …)`. Not `as_ids` (a count
    up to a cap, in no order): the two tests on each row of the index's, so the count stops at
    its cap (collected first, 200,000 ids took 0.5 s)."""
    query = pg_windows_query(term) if windows and not walk else None
    if query is None:
        params.append(like_pattern(term))
        if windows and walk:
            # The same ILIKE, wrapped: the planner takes a wrapped test to hold for half the
            # rows, so it walks the date index for a page. No statistics describe the text
            # without the pg_trgm index, and the bare ILIKE (or texticlike(), which has the
            # same estimator) was taken for 1 row in 10,000: a pass and a sort, 1.3 s at 1M.
            return f"COALESCE(({pg_search_document(record_type, alias + '.')}) ILIKE ? ESCAPE '\\', false)"
        return f"({pg_search_document(record_type, alias + '.')}) ILIKE ? ESCAPE '\\'"
    params.extend([query, like_pattern(term)])
    if not as_ids:
        return (f"({pg_windows_document(record_type).format(t=alias + '.')} @@ lower(?)::tsquery AND "
                f"({pg_search_document(record_type, alias + '.')}) ILIKE ? ESCAPE '\\')")
    return (f"{alias}.id = ANY(ARRAY(SELECT s.id FROM {record_type.table} AS s WHERE "
            f"{pg_windows_document(record_type).format(t='s.')} @@ lower(?)::tsquery AND "
            f"({pg_search_document(record_type, 's.')}) ILIKE ? ESCAPE '\\'))")


def _text_condition(record_type: RecordType, term: str, params: list, dialect: str = "sqlite",
                    walk: bool = False, alias: str = "r", grams: bool = False, pg_ids: bool = True) -> str:
    """The rows holding `term`. SQLite, 3+ characters: by default the set of rowids the FTS5
    index returns (`r.id IN (…)`); with `walk`, a test of each row (see `plan_terms`): a LIKE
    over the indexed columns, which can only hold when the index matches too (LIKE folds ASCII
    case, the trigram index folds all of Unicode: LIKE ⇒ MATCH), else the index asked about
    that one row — the same rows either way, in whatever order the query walks."""
    columns = record_type.text_index_columns
    if dialect == "postgresql":
        return _pg_text_condition(record_type, term, params, alias, grams, walk, pg_ids)
    fts = fts_table(record_type)
    if len(term) >= TRIGRAM and not walk:
        params.append(fts_phrase(term))
        return f"{alias}.id IN (SELECT rowid FROM [{fts}] WHERE [{fts}] MATCH ?)"
    pattern = like_pattern(term)
    params.extend([pattern] * len(columns))
    likes = [f"{alias}.[{col}] LIKE ? ESCAPE '\\'" for col in columns]
    if len(term) >= TRIGRAM and _has_case(term):
        params.append(fts_phrase(term))
        likes.append(f"EXISTS (SELECT 1 FROM [{fts}] WHERE [{fts}] MATCH ? AND rowid = {alias}.id)")
    if len(term) < TRIGRAM and not walk and grams and gram_indexed(term):
        # The rows whose index holds a trigram starting with the term (a range of the sorted
        # vocabulary), each tested with LIKE: the rows LIKE finds, without a pass.
        low, high = _gram_range(term)
        return _gram_condition(alias, fts_vocab_table(record_type), likes, params, low, high)
    if len(term) < TRIGRAM and not walk:
        # A rare short term: one pass over the table in storage order, then sort what it
        # found; walking the date index instead reads the rows in random order, twice as slow.
        inner = [like.replace(f"{alias}.[", "s.[") for like in likes]
        return f"{alias}.id IN (SELECT s.id FROM [{record_type.table}] AS s WHERE {' OR '.join(inner)})"
    return "(" + " OR ".join(likes) + ")"


def _gram_condition(alias: str, vocab: str, likes: list[str], params: list, low: str, high: str) -> str:
    """`alias.id` among the documents of the vocabulary's trigrams in [low, high], and LIKE."""
    like_params = params[len(params) - len(likes):]
    del params[len(params) - len(likes):]
    params.extend([low, high, *like_params])
    return f"({alias}.id IN (SELECT doc FROM [{vocab}] WHERE term >= ? AND term <= ?) AND ({' OR '.join(likes)}))"


def _has_case(term: str) -> bool:
    """Whether `term` has a letter with an upper and a lower case. Without one (Japanese,
    Korean, digits, signs) the trigram index's case folding cannot make it match anything LIKE
    does not, so LIKE alone is the index's answer; with one, Unicode folds more than LIKE's
    ASCII (Ä/ä, the Kelvin sign), so a row LIKE misses is asked of the index."""
    return any(ch.lower() != ch.upper() for ch in term)


def _either_language(column: str, value: str, params: list) -> str:
    pattern = like_pattern(value)
    params.extend([pattern, pattern])
    return f"(r.[{column}_original] LIKE ? ESCAPE '\\' OR r.[{column}_ko] LIKE ? ESCAPE '\\')"


def _facet_condition(record_type: RecordType, field: str, value: str, params: list, dialect: str,
                     as_set: bool = False) -> str:
    facet = record_type.facet(field)
    value = facet.filter_value(value)
    if facet.ranged:
        return _ranged_condition(field, value, params, dialect)
    params.append(value)
    if facet.multi:   # a JSON list: any of its values
        if dialect == "postgresql":
            return (f"EXISTS (SELECT 1 FROM jsonb_array_elements_text(NULLIF(r.[{field}]::text, '')::jsonb) AS v(value) "
                    "WHERE LOWER(v.value) = LOWER(?))")
        return f"EXISTS (SELECT 1 FROM json_each(r.[{field}]) WHERE LOWER(json_each.value) = LOWER(?))"
    if dialect == "postgresql":
        # Its planner sorted the whole match for the IN form (first row 0.7 → 1.2 s at a
        # million); the plain test walks the date index as SQLite's IN form does.
        return f"LOWER(CAST(r.[{field}] AS TEXT)) = LOWER(?)"
    return _stored_values_condition(record_type, field, params, as_set)


def _stored_values_condition(record_type: RecordType, field: str, params: list, as_set: bool = False) -> str:
    """Case-insensitive equality (`LOWER(CAST(field AS TEXT)) = LOWER(value)`, the value last in
    `params`) written so the column's index answers it: the column compared with the stored
    values that are equal to the value that way, found by walking the index one distinct value
    at a time (a seek each: a facet holds few). Comparing LOWER(...) on every row read the
    whole table for a rare value, and cost 0.7 s per million rows read for a common one.

    A text column holds only text (or bytes), and two stored values equal under `=` are then
    the same text, so `IN` selects exactly the rows the LOWER test does. A column of another
    affinity may hold 5 and 5.0, equal under `=` and not as text: the LOWER test stays there.

    `as_set` (an export of every match): the ids the column's index holds for those values,
    which SQLite reads before sorting them; without it SQLite walks the newest-first index
    testing each row, best for a page but a pass over the table for a rare value."""
    value = params.pop()
    table = record_type.table
    stored = (f"(WITH RECURSIVE bc_distinct(v) AS (SELECT min([{field}]) FROM [{table}] UNION ALL "
              f"SELECT (SELECT min([{field}]) FROM [{table}] WHERE [{field}] > bc_distinct.v) FROM bc_distinct "
              f"WHERE bc_distinct.v IS NOT NULL) "
              f"SELECT v FROM bc_distinct WHERE LOWER(CAST(v AS TEXT)) = LOWER(?))")
    params.append(value)
    condition = f"r.[{field}] IN {stored}"
    if as_set:
        condition = f"r.id IN (SELECT id FROM [{table}] WHERE [{field}] IN {stored})"
    if record_type.column_types.get(field) is not str:
        params.append(value)
        condition = f"({condition} AND LOWER(CAST(r.[{field}] AS TEXT)) = LOWER(?))"
    return condition


def _ranged_condition(field: str, value, params: list, dialect: str) -> str:
    """The value itself, or a stored range `low-high` of values as wide as it that holds it
    (equal widths compare correctly as text: "2019" <= "2020" <= "2021")."""
    column = f"r.[{field}]"
    dash = f"strpos({column}, '-')" if dialect == "postgresql" else f"instr({column}, '-')"
    params.extend([value, value, value, value])
    return (f"({column} = ? OR (length({column}) = 2 * length(?) + 1 AND {dash} = length(?) + 1 "
            f"AND ? BETWEEN substr({column}, 1, {dash} - 1) AND substr({column}, {dash} + 1)))")


def _option_condition(record_type: RecordType, option: str, value: str, params: list, dialect: str) -> str:
    """A named option (`--manufacturer X`) through the facet declared for it: the normalised
    value on the facet's column (every spelling of a maker finds its key), or a substring of
    the facet's `also_text` in either language."""
    facet = record_type.facet_for_option(option)
    if facet is None:
        raise UnknownFilter(f"--{option} does not apply to {record_type.name} (it declares no facet for --{option})")
    condition = _facet_condition(record_type, facet.field, value, params, dialect)
    if facet.also_text is None:
        return condition
    return f"({condition} OR {_either_language(facet.also_text, value, params)})"


def _pair(base: str) -> tuple[str, str]:
    return f"{base}_original", f"{base}_ko"


def _needs(record_type: RecordType, option: str, *columns: str) -> None:
    missing = [c for c in columns if c not in columns_of(record_type)]
    if missing:
        raise UnknownFilter(f"{option} does not apply to {record_type.name} (it has no {', '.join(missing)})")


def build_query(filters: RecallFilter, *, columns: str = "r.*", limit: int | None = None,
                offset: int = 0, ordered: bool = True, dialect: str = "sqlite",
                walk: frozenset[str] = frozenset(), driven: bool = False, grams: bool = False,
                facet_sets: bool = False, hide_copies: bool = False) -> tuple[str, list]:
    """SQL and parameters selecting the records that match `filters`, newest first
    (`dialect`: "sqlite" or "postgresql", the `dialect` of the connection it will run on).

    How, never which rows: `walk` names terms tested row by row (`plan_terms`); `driven`
    (SQLite) reads the first term of 3+ characters as a join from its FTS5 index, so a query
    with a LIMIT and no order stops after that many index entries (`count_upto`; on PostgreSQL
    a term is tested on its windows index's rows without collecting their ids first); `grams`
    (`short_index`): a 1–2 character term is read from the padded index's vocabulary (SQLite),
    any term from the windows index (PostgreSQL, `_pg_text_condition`); `facet_sets`: a facet
    filter reads its rows' ids from the column's index (an export); `hide_copies`: records that
    are another publisher's copy are left out (`hides_copies`)."""
    check_query_size(filters.text)
    record_type = filters.declaration()
    check_facets(record_type, filters.facets)
    where: list[str] = []
    params: list = []
    driver = None
    if driven and dialect == "sqlite" and record_type.text_index_columns:
        driver = next((t for t in filters.terms() if len(t) >= TRIGRAM), None)
    joined = False
    for term in filters.terms():
        if term == driver and not joined:
            params.append(fts_phrase(term))
            where.append(f"[{fts_table(record_type)}] MATCH ?")
            joined = True
            continue
        where.append(_text_condition(record_type, term, params, dialect, walk=term in walk, grams=grams,
                                     pg_ids=not driven))
    if filters.countries:
        _needs(record_type, "--country", "country")
        where.append(f"r.country IN ({','.join('?' * len(filters.countries))})")
        params.extend(c.upper() for c in filters.countries)
    if filters.manufacturer:
        where.append(_option_condition(record_type, "manufacturer", filters.manufacturer, params, dialect))
    if filters.model:
        _needs(record_type, "--model", *_pair("model"))
        where.append(_either_language("model", filters.model, params))
    if filters.year is not None:
        where.append(_option_condition(record_type, "year", str(int(filters.year)), params, dialect))
    if filters.since or filters.until:
        if record_type.date_field is None:
            raise UnknownFilter(f"--since/--until do not apply to {record_type.name} (it has no date)")
        if filters.since:
            where.append(f"r.[{record_type.date_field}] >= ?")
            params.append(filters.since.isoformat())
        if filters.until:
            where.append(f"r.[{record_type.date_field}] <= ?")
            params.append(filters.until.isoformat())
    if filters.source:
        where.append("r.source = ?")
        params.append(filters.source)
    for field, value in filters.facets:
        where.append(_facet_condition(record_type, field, value, params, dialect, as_set=facet_sets))
    if hide_copies:
        where.append(groups.hidden_copies_condition(record_type))
    sql = f"SELECT {columns} FROM {record_type.table} AS r"   # a declared identifier; the web plugin looks for this form
    if joined:
        sql = (f"SELECT {columns} FROM [{fts_table(record_type)}] JOIN {record_type.table} AS r "
               f"ON r.id = [{fts_table(record_type)}].rowid")
    if where:
        sql += " WHERE " + " AND ".join(where)
    if ordered:
        sql += f" ORDER BY {order_by(record_type)}"
    if limit is not None:
        sql += " LIMIT ? OFFSET ?"
        params.extend([int(limit), int(offset)])
    return sql, params


def best_text(record_type: RecordType, row: dict) -> str | None:
    """The display rule: the line a screen shows for a record, Korean when translated, else
    the original (declared per type: "summary, else cause, else component" for vehicles)."""
    korean, original = record_type.best_text(row)
    return korean or original


def text_conditions(filters: RecallFilter, *, walk: frozenset[str], alias: str, grams: bool = False) -> tuple[str, list]:
    """The text terms of `filters` alone as one condition on table `alias` (SQLite), for a
    query the caller writes (the web view's page walks its own table)."""
    check_query_size(filters.text)
    record_type = filters.declaration()
    params: list = []
    where = [_text_condition(record_type, t, params, walk=t in walk, alias=alias, grams=grams) for t in filters.terms()]
    return " AND ".join(where) or "1 = 1", params


def short_terms(filters: RecallFilter, grams: bool = False) -> frozenset[str]:
    """Terms no index can answer: a query that reads the table in storage order anyway (a
    count, a summary) tests them on each row it reads. With `grams` (the padded index) only
    the 1–2 character terms its vocabulary cannot list (`gram_indexed`)."""
    return frozenset(t for t in filters.terms() if len(t) < TRIGRAM and not (grams and gram_indexed(t)))


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
            replace(filters, text=None) != replace(RecallFilter(record_type=filters.record_type), text=None):
        return frozenset()
    top = conn.execute(f"SELECT max(rowid) FROM [{record_type.table}]").fetchone()[0] or 0
    threshold = max(WALK_MIN, int(top * WALK_SHARE))
    fts = fts_table(record_type)
    walk = set()
    for term in terms:
        if len(term) >= TRIGRAM:
            found = conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM [{fts}] WHERE [{fts}] MATCH ? LIMIT ?)",
                                 [fts_phrase(term), threshold]).fetchone()[0]
            common = found >= threshold
        else:
            common = _common_short_term(conn, record_type, term, top)
        if common:
            walk.add(term)
    return frozenset(walk)


_newest_counts: dict[tuple, int] = {}   # (connection, table, term, last id, rows) → records holding it among the newest


def _common_short_term(conn, record_type: RecordType, term: str, top: int) -> bool:
    """Whether a 1–2 character term is in at least WALK_SHARE of the newest SAMPLE_ROWS records
    (no index counts it cheaply). (Only how a term is read depends on it, never which rows match.)"""
    return _newest_holding(conn, record_type, term, top, SAMPLE_ROWS) >= WALK_SHARE * min(SAMPLE_ROWS, top)


def _newest_holding(conn, record_type: RecordType, term: str, top: int, rows: int) -> int:
    """How many of the newest `rows` records (ids above `top` − rows) hold `term`, each tested
    row by row (a LIKE on SQLite, an ILIKE on PostgreSQL): a term's share where no index
    counts it cheaply. Counted once per connection and last id: a page asks for its plan,
    then its count."""
    key = (id(conn), record_type.table, term, top, rows)
    if key not in _newest_counts:
        if len(_newest_counts) >= 256:
            _newest_counts.pop(next(iter(_newest_counts), None), None)   # (threads of the web view share it)
        params: list = []
        condition = _text_condition(record_type, term, params, _dialect(conn), walk=True)
        _newest_counts[key] = conn.execute(
            f"SELECT count(*) FROM [{record_type.table}] AS r WHERE r.id > ? AND {condition}",
            [top - rows, *params]).fetchone()[0]
    return _newest_counts[key]


def _a_rare_facet_value(conn, filters: RecallFilter) -> bool:
    """Whether a facet filter selects fewer than WALK_SHARE of the records (counted in the
    column's index, up to that many): an export then reads its ids and sorts them; a common
    value is read walking the newest-first index, which needs no sort of every matching row
    (200,000 wide rows sorted spilled to disk: slower than the walk)."""
    record_type = filters.declaration()
    if _dialect(conn) != "sqlite":
        return False
    top = conn.execute(f"SELECT max(id) FROM [{record_type.table}]").fetchone()[0] or 0
    threshold = max(WALK_MIN, int(top * WALK_SHARE))
    for field, value in filters.facets:
        facet = record_type.facet(field)
        if facet is None or facet.multi or facet.ranged:
            continue
        params: list = []
        condition = _facet_condition(record_type, field, value, params, _dialect(conn))
        found = conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM [{record_type.table}] AS r WHERE {condition} "
                             "LIMIT ?) AS f", [*params, threshold]).fetchone()[0]
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
    cursor = conn.execute(sql, params)
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
    cursor = conn.execute(sql, params)
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
    return conn.execute(sql, params).fetchone()[0]


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
        top = conn.execute(f"SELECT max(rowid) FROM [{record_type.table}]").fetchone()[0] or 0
        walk |= {t for t in short_terms(filters) - walk if _common_short_term(conn, record_type, t, top)}
    sql, params = build_query(filters, columns="1", ordered=False, dialect=_dialect(conn), driven=True,
                              walk=frozenset(walk), grams=grams, hide_copies=hides_copies(conn, filters))
    return conn.execute(f"SELECT count(*) FROM ({sql} LIMIT ?) AS matched", [*params, cap + 1]).fetchone()[0]


def count_by_source(conn, record_type: RecordType) -> dict[str, int]:
    """Records of the type per source (sources with none are absent)."""
    sql = f"SELECT source, COUNT(*) FROM [{record_type.table}] GROUP BY source ORDER BY source"
    return {source: n for source, n in conn.execute(sql).fetchall()}


def date_unknown_by_source(conn, record_type: RecordType) -> dict[str, int]:
    """Records of the type stored without a known date, per source (sources with none are
    absent; {} for a type whose records always have one)."""
    if not record_type.has_date_unknown:
        return {}
    sql = (f"SELECT source, COUNT(*) FROM [{record_type.table}] WHERE [{DATE_UNKNOWN}] = 1 "
           "GROUP BY source ORDER BY source")
    return {source: n for source, n in conn.execute(sql).fetchall()}


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


def has_korean(text: str | None) -> bool:
    return bool(text and _HANGUL.search(text))


def translation_progress(conn: sqlite3.Connection, filters: RecallFilter) -> tuple[int, int]:
    """(translated, total) among the records the filters select, text aside: Korean words can
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
    noun = filters.declaration().title.lower()
    return (f"Korean words only find translated {noun}: {translated} of {total} {noun} translated. "
            "Search the original language too, or run `basecrawler translate`.")


__all__ = ["RecallFilter", "RecordFilter", "build_query", "check_query_size", "check_facets", "QueryTooLarge",
           "UnknownFilter", "MAX_QUERY_TERMS", "MAX_QUERY_CHARS", "iter_recalls", "search", "count", "best_text",
           "fts_phrase", "TRIGRAM", "BEST_TEXT", "DEFAULT_TYPE", "has_korean", "translation_progress",
           "untranslated_hint", "plan_terms", "short_terms", "short_index", "gram_indexed", "pg_windows_index", "pg_windows_query", "pg_walk", "text_conditions", "count_upto", "COUNT_CAP", "count_by_source", "counts_by_type", "date_unknown_by_source", "order_by", "fts_table", "pg_search_document", "columns_of"]
