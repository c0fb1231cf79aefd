"""Matching a text term (basecrawler/reading/search.py): the SQL condition selecting the rows
that hold one whitespace-separated term, on either engine.

Text terms of three or more characters go through the type's FTS5 index (trigram tokenizer,
so any Japanese, Korean or English substring of 3+ characters matches); shorter terms
(`制動`, `브레`, `AC`) cannot form a trigram: the padded index's vocabulary lists their rows
(`short_index`), else they fall back to LIKE over the same columns. Everything user-supplied
is bound as a parameter; a term is quoted as one FTS5 phrase, so query syntax characters in it
are plain text.

On PostgreSQL every term is one ILIKE over the searched columns joined into one text. The
type's windows index (tables.py `pg_windows_document`) answers terms of every length, each
candidate tested with the same ILIKE (`pg_text_condition`); a store that keeps the pg_trgm
index (made before the windows index, or BASECRAWLER_PG_SEARCH_INDEX=trgm) answers terms of
3+ characters from it, and shorter terms scan.
"""
from __future__ import annotations

import re
import threading
import weakref
from typing import Iterator

from cachetools import LRUCache

from basecrawler.recordtypes import RecordType
from basecrawler.recordtypes.tables import (PAD, PG_LONG_TEXT, attach_fts_vocab, fts_padded, fts_vocab_table,
                                            pg_windows_document, pg_windows_index_name)
from basecrawler.recordtypes.tables import pg_search_document as tables_pg_search_document
from basecrawler.store.engines.dialect import POSTGRES, SQLITE, Dialect
from basecrawler.store.engines.dialect import dialect_of as engine_dialect

TRIGRAM = 3

# Hangul syllables and jamo: a query with any of these can only match the `_ko` columns.
_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7a3]")


def dialect_of(conn) -> str:
    """"postgresql" for the store's PostgreSQL adapter, "sqlite" for a sqlite3 connection."""
    return getattr(conn, "dialect", "sqlite")


def column(d: Dialect, name: str) -> str:
    """A declared column (or table) name as dialect `d` reads it. SQLite keeps `[name]`: a
    double-quoted name it cannot find is taken for a string literal, so a missing column would
    match nothing instead of failing; PostgreSQL has no brackets, and errors either way."""
    return f"[{name}]" if d is SQLITE else d.quote(name)


def has_korean(text: str | None) -> bool:
    return bool(text and _HANGUL.search(text))


def fts_table(record_type: RecordType) -> str:
    return f"{record_type.table}_fts"



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


def gram_drivable(term: str) -> bool:
    """Whether the rows holding a 1–2 character `term` are exactly the documents of the padded
    index's trigrams that start with it (`gram_trigrams`), with no LIKE to confirm them: the
    vocabulary lists it (`gram_indexed`) and it has no cased letter, so case folding cannot
    make the index hold it for text LIKE misses (as for a 3+ character term, `_has_case`)."""
    return gram_indexed(term) and not _has_case(term)


def gram_trigrams(conn, record_type: RecordType, term: str) -> Iterator[str]:
    """The index's trigrams that start with `term`, in the vocabulary's order, one seek each
    (SQLite, a connection `short_index` gave its vocabulary table). Every term of the trigram
    index is three characters, so the next one after `t` is the first at or above `t` + U+0001."""
    low, high = gram_range(term)
    statement = SQLITE.query(f"SELECT term FROM [{fts_vocab_table(record_type)}] WHERE term >= ? AND term <= ? LIMIT 1")
    bound, last = low, None
    while (row := conn.execute(statement, [bound, high]).fetchone()) is not None and row[0] != last:
        last = row[0]
        yield last
        bound = last + "\x01"


def gram_match(trigrams: list[str]) -> str:
    """The FTS5 query matching the documents that hold any of `trigrams` (each one phrase)."""
    return " OR ".join(fts_phrase(t) for t in trigrams)


def gram_range(term: str) -> tuple[str, str]:
    """The vocabulary's trigrams that start with `term` (ASCII-lower-cased, as the index holds
    it): every one from the term itself to the term followed by the highest code points."""
    low = "".join(ch.lower() if ch.isascii() else ch for ch in term)
    return low, low + "\U0010ffff" * (TRIGRAM - len(term))


# (connection, table) → the schema version its padded index was seen at; the web view's SQL
# threads share it (the lock guards the table only).
_short_indexes: LRUCache = LRUCache(256)
_short_indexes_lock = threading.Lock()


def short_index(conn, record_type: RecordType) -> bool:
    """Whether the type's SQLite full-text index is the padded one (tables.py), whose
    vocabulary lists the rows holding any 1–2 character string; if so the connection gets
    its temporary vocabulary table, which queries built with `grams` read. Looked up in the
    schema once per connection and schema version (a page asks several times). On PostgreSQL:
    whether the type's table has the windows index (`pg_windows_index`)."""
    if dialect_of(conn) == "postgresql":
        return bool(record_type.text_index_columns) and pg_windows_index(conn, record_type)
    if dialect_of(conn) != "sqlite" or not record_type.text_index_columns:
        return False
    key = (id(conn), record_type.table)
    version = conn.execute(SQLITE.query("PRAGMA schema_version")).fetchone()[0]
    with _short_indexes_lock:
        seen = _short_indexes.get(key)
    if seen == version and conn.execute(
            SQLITE.query("SELECT 1 FROM temp.sqlite_master WHERE name = ?"), [fts_vocab_table(record_type)]).fetchone():
        return True   # (the vocabulary on this very connection: an id reused by another has none)
    if not fts_padded(conn, record_type):
        return False
    attach_fts_vocab(conn, record_type)
    with _short_indexes_lock:
        _short_indexes[key] = version
    return True


_pg_windows: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # connection → {table: index there}


def pg_windows_index(conn, record_type: RecordType) -> bool:
    """Whether the type's PostgreSQL table has the windows index (tables.py
    `pg_windows_document`; a store may keep pg_trgm in its place), asked once per
    connection. Either answer only chooses how a term is read, never which rows match."""
    known = _pg_windows.setdefault(conn, {})
    if record_type.table not in known:
        found = conn.execute(POSTGRES.query(f"SELECT to_regclass({POSTGRES.p})"),
                             [POSTGRES.quote(pg_windows_index_name(record_type))]).fetchone()[0]
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



def pg_text_condition(record_type: RecordType, term: str, params: list, alias: str, windows: bool,
                       walk: bool, as_ids: bool = True, p: str = POSTGRES.p) -> str:
    """PostgreSQL: the ILIKE over the searched text (which the pg_trgm index answers for 3+
    characters). With the windows index and unless `walk` (`pg_walk`), the ids of the rows
    its tsquery finds, each tested with the ILIKE — exactly the ILIKE's rows, for terms of any
    length — collected first (an array the query then reads by id), so the planner cannot
    walk the date index testing each row: it takes the windows query and the ILIKE for
    independent, underestimates how many rows hold a term, and walked a million rows for
    `Q7` (1.2 s), also when the ids were written as `IN (SELECT …)`. Not `as_ids` (a count
    up to a cap, in no order): the two tests on each row of the index's, so the count stops at
    its cap (collected first, 200,000 ids took 0.5 s). `p`: the placeholder (PostgreSQL's)."""
    query = pg_windows_query(term) if windows and not walk else None
    if query is None:
        params.append(like_pattern(term))
        if windows and walk:
            # The same ILIKE, wrapped: the planner takes a wrapped test to hold for half the
            # rows, so it walks the date index for a page. No statistics describe the text
            # without the pg_trgm index, and the bare ILIKE (or texticlike(), which has the
            # same estimator) was taken for 1 row in 10,000: a pass and a sort, 1.3 s at 1M.
            return f"COALESCE(({pg_search_document(record_type, alias + '.')}) ILIKE {p} ESCAPE '\\', false)"
        return f"({pg_search_document(record_type, alias + '.')}) ILIKE {p} ESCAPE '\\'"
    params.extend([query, like_pattern(term)])
    if not as_ids:
        return (f"({pg_windows_document(record_type).format(t=alias + '.')} @@ lower({p})::tsquery AND "
                f"({pg_search_document(record_type, alias + '.')}) ILIKE {p} ESCAPE '\\')")
    return (f"{alias}.id = ANY(ARRAY(SELECT s.id FROM {record_type.table} AS s WHERE "
            f"{pg_windows_document(record_type).format(t='s.')} @@ lower({p})::tsquery AND "
            f"({pg_search_document(record_type, 's.')}) ILIKE {p} ESCAPE '\\'))")


def text_condition(record_type: RecordType, term: str, params: list, dialect: str | Dialect = "sqlite",
                    walk: bool = False, alias: str = "r", grams: bool = False, pg_ids: bool = True,
                    p: str | None = None) -> str:
    """The rows holding `term`. SQLite, 3+ characters: by default the set of rowids the FTS5
    index returns (`r.id IN (…)`); with `walk`, a test of each row (see `plan_terms`): a LIKE
    over the indexed columns, which can only hold when the index matches too (LIKE folds ASCII
    case, the trigram index folds all of Unicode: LIKE ⇒ MATCH), else the index asked about
    that one row — the same rows either way, in whatever order the query walks. Spelled for
    `dialect` (a Dialect or its name; `p`, when given, its placeholder)."""
    columns = record_type.text_index_columns
    if engine_dialect(dialect) is POSTGRES:
        return pg_text_condition(record_type, term, params, alias, grams, walk, pg_ids, p or POSTGRES.p)
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
        low, high = gram_range(term)
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



__all__ = ["TRIGRAM", "dialect_of", "column", "has_korean", "fts_table", "like_pattern", "fts_phrase", "pg_search_document",
           "gram_indexed", "gram_drivable", "gram_range", "gram_trigrams", "gram_match", "short_index", "pg_windows_index", "pg_windows_query", "pg_text_condition",
           "text_condition"]
