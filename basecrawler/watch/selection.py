"""Which candidates each watch's search selects, for all watches of a record type at once.

A search (`reading/search.py` `build_query`) is its terms AND its other filters (facets,
source, countries), so it splits without changing which rows match: the other filters are one
query per distinct set of them (a handful for a thousand watches), each distinct term of every
watch is found once, and a watch's matches are the intersection. A term is found in the
candidates' texts by one pass of Python (`textscan`) when the engines' folds agree on it; the
rest — a term with a letter outside ASCII that has a case, a record whose text folds into
ASCII — is asked of the store as the search asks it (its index: `pg_terms` on PostgreSQL with
the windows index, the term's own search otherwise), restricted to the records concerned.
One query per watch cost a round trip, a plan and an index lookup each (bench/README.md).
"""
from __future__ import annotations

from dataclasses import replace

from basecrawler.reading.search import RecordFilter, build_query, pg_search_document, short_index
from basecrawler.recordtypes import RecordType
from basecrawler.store.engines.dialect import POSTGRES, SQLITE, dialect_of
from basecrawler.watch import pg_terms, textscan

_UNSURE = "watch_unsure"
_ASCII = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def filter_ids(store, filters: RecordFilter, candidates: str) -> dict[int, str]:
    """id → source of the candidates the filters select."""
    d = dialect_of(store)
    grams = short_index(store.db.conn, filters.declaration())
    search, params = build_query(filters, columns="r.id AS id, r.source AS source", ordered=False,
                                 dialect=d, grams=grams)
    # (build_query's statement is spelled for the store's engine: so is what holds it)
    rows = store.query(search.dialect.query(f"SELECT m.id, m.source FROM ({search}) AS m "
                                            f"WHERE m.id IN (SELECT id FROM {candidates})"), params)
    return {r["id"]: r["source"] for r in rows}


def store_term_ids(store, record_type: RecordType, terms: list[str], candidates: str) -> dict[str, set[int]]:
    """The candidates holding each term, asked of the store as `search` asks it."""
    if not terms:
        return {}
    if pg_terms.usable(store, record_type):
        return pg_terms.term_ids(store, record_type, terms, candidates)
    found = {}
    for term in terms:
        found[term] = set(filter_ids(store, RecordFilter(text=term, record_type=record_type.name), candidates))
    return found


def _folds_ascii_as_python(store) -> bool:
    """Whether the store folds ASCII letters as `textscan` does: not under a PostgreSQL
    collation whose `lower` differs (a Turkish `I`), nor with SQLite's case-sensitive LIKE."""
    if dialect_of(store) is POSTGRES:
        return store.scalar(POSTGRES.query("SELECT lower(%s::text)"), [_ASCII]) == _ASCII.lower()
    # (LIKE itself: what is asked is whether SQLite's LIKE folds case here)
    return bool(store.scalar(SQLITE.query("SELECT ? LIKE ?"), [_ASCII, _ASCII.lower()]))


def _scan(store, record_type: RecordType, candidates: str) -> textscan.TextScan:
    """The candidates' searched values joined with a space, each converted to text by the
    engine (a number as LIKE and the index read it): PostgreSQL's is the very text it searches."""
    d = dialect_of(store)
    if d is POSTGRES:
        text = pg_search_document(record_type, "r.")
    else:
        text = " || ' ' || ".join(f"COALESCE(r.{d.quote(c)}, '')" for c in record_type.text_index_columns)
    rows = store.query(d.query(f"SELECT r.id AS id, {text} AS text FROM {record_type.table} AS r "
                               f"WHERE r.id IN (SELECT id FROM {candidates})"))
    return textscan.TextScan((row["id"], row["text"]) for row in rows)


def _fill(store, table: str, ids) -> None:
    d = dialect_of(store)

    def op(db):
        db.conn.execute(d.write(f"CREATE TEMP TABLE IF NOT EXISTS {table} (id BIGINT PRIMARY KEY)"))
        db.conn.execute(d.write(f"DELETE FROM {table}"))
        db.conn.executemany(d.write(f"INSERT INTO {table} (id) VALUES ({d.p})"), [[i] for i in sorted(ids)])
    store.write(op)
    if d is POSTGRES:   # (a temporary table is never analyzed by autovacuum)
        store.write(lambda db: db.conn.execute(d.write(f"ANALYZE {table}")))


def term_ids(store, record_type: RecordType, terms: list[str], candidates: str) -> dict[str, set[int]]:
    """The candidates holding each term: the plain ones found by `textscan` in the records it
    is sure of, everything else asked of the store."""
    plain = [t for t in terms if textscan.plain_term(t)]
    if not plain or not record_type.text_index_columns or not _folds_ascii_as_python(store):
        return store_term_ids(store, record_type, terms, candidates)
    scan = _scan(store, record_type, candidates)
    found = {t: scan.ids(t) for t in plain}
    found.update(store_term_ids(store, record_type, [t for t in terms if t not in found], candidates))
    if scan.unsure:
        _fill(store, _UNSURE, scan.unsure)
        for term, ids in store_term_ids(store, record_type, plain, _UNSURE).items():
            found[term] |= ids
    return found


def matching_ids(store, record_type: RecordType, searches, candidates: str) -> dict[RecordFilter, list[tuple[int, str]]]:
    """For each search (RecordFilter of `record_type`), the (id, source) of the candidates
    (ids in the temporary table `candidates`) it selects: the rows `build_query` selects."""
    searches = list(dict.fromkeys(searches))
    by_rest = {s: replace(s, text=None) for s in searches}
    rest_ids = {rest: filter_ids(store, rest, candidates) for rest in dict.fromkeys(by_rest.values())}
    terms = list(dict.fromkeys(t for s in searches for t in s.terms()))
    found = term_ids(store, record_type, terms, candidates) if terms else {}
    out: dict[RecordFilter, list[tuple[int, str]]] = {}
    for search in searches:
        rest = rest_ids[by_rest[search]]
        ids = set(rest)
        for term in search.terms():
            ids &= found[term]
        out[search] = [(i, rest[i]) for i in sorted(ids)]
    return out
