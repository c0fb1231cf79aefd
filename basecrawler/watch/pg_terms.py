"""PostgreSQL: the candidates holding each of many terms, in a few statements for all of them
(the terms `watch/selection.py` leaves to the store).

On PostgreSQL a term selects exactly the rows whose searched text ILIKE-matches it (the
windows index only finds them faster, `reading/search.py`): every term is looked up in the
windows index in one statement (a VALUES list joined to the index), restricted to the
candidates. When the candidates are few beside the table (`OWN_INDEX_RATIO`), their texts and
windows go into a temporary table with a GIN index of its own, so a term costs its candidates'
rows, not its rows in the whole table.

Two things the lookups need, both from the new records being new: their index entries sit in
the GIN index's pending list, which every lookup reads whole until it is merged into the index
(a vacuum does it, or `gin_clean_pending_list`, once here); and a table just filled has no
statistics yet, so the planner may take a pass over the table as cheaper than the index and
run it once per term: the term statement runs with sequential scans off (`SET LOCAL`).
"""
from __future__ import annotations

import logging

from basecrawler.reading.search import like_pattern, pg_search_document, pg_windows_query, short_index
from basecrawler.recordtypes import RecordType
from basecrawler.recordtypes.tables import pg_windows_document, pg_windows_index_name
from basecrawler.store.engines.dialect import POSTGRES as d

log = logging.getLogger("basecrawler.watch")

_TERMS_PER_STATEMENT = 500
_TEXTS = "watch_candidate_texts"
# A table this many times the candidates (a store that has been running, a day's new records):
# their texts get an index of their own, since a term's rows in the whole table (each read and
# tested) then outnumber the candidates' (bench/README.md).
OWN_INDEX_RATIO = 5


def usable(store, record_type: RecordType) -> bool:
    """Whether this path answers the type's searches: PostgreSQL with the windows index (a
    store keeping pg_trgm instead reads each watch's search as `search` does)."""
    return store.engine == "postgresql" and short_index(store.db.conn, record_type)


def _merge_pending(store, record_type: RecordType) -> None:
    try:
        store.query(d.write(f"SELECT gin_clean_pending_list(to_regclass({d.p})) AS merged"),
                    [d.quote(pg_windows_index_name(record_type))])
    except Exception as exc:   # (not the index's owner: the lookups only read the pending list)
        log.debug("watches: the windows index's pending list was not merged: %s", exc)


def _own_index(store, record_type: RecordType, candidates: str) -> bool:
    """Whether the candidates are few enough beside the table (its planner's row count) that
    indexing their texts apart beats reading each term's rows of the whole table."""
    rows = store.scalar(d.query(f"SELECT reltuples FROM pg_class WHERE oid = to_regclass({d.p})"),
                        [d.quote(record_type.table)])
    count = store.scalar(d.query(f"SELECT COUNT(*) FROM {candidates}")) or 0
    return bool(count) and (rows or 0) > OWN_INDEX_RATIO * count


def _index_candidates(store, record_type: RecordType, candidates: str) -> None:
    """The candidates' searched text and its windows (the very expressions of the type's
    index), in a temporary table with a GIN index of its own, built in one pass."""
    document = pg_search_document(record_type, "r.")
    windows = pg_windows_document(record_type).format(t="r.")

    def op(db):
        db.conn.execute(d.write(f"DROP TABLE IF EXISTS {_TEXTS}"))
        db.conn.execute(d.write(f"CREATE TEMP TABLE {_TEXTS} AS SELECT r.id AS id, ({document}) AS doc, "
                                f"({windows}) AS win FROM {record_type.table} AS r "
                                f"WHERE r.id IN (SELECT id FROM {candidates})"))
        db.conn.execute(d.write(f"CREATE INDEX ON {_TEXTS} USING gin (win)"))
    store.write(op)
    store.write(lambda db: db.conn.execute(d.write(f"ANALYZE {_TEXTS}")))


def _term_ids(store, record_type: RecordType, terms: list[str], candidates: str, own: bool) -> dict[str, set[int]]:
    """The candidates holding each term: looked up in the type's windows index (restricted to
    the candidates after), or with `own` in the candidates' own index (`_index_candidates`)."""
    found: dict[str, set[int]] = {t: set() for t in terms}
    if own:
        rows, document, windows, among = f"{_TEXTS} AS s", "s.doc", "s.win", ""
    else:
        rows, document = f"{record_type.table} AS s", f"({pg_search_document(record_type, 's.')})"
        windows, among = pg_windows_document(record_type).format(t="s."), f"s.id IN (SELECT id FROM {candidates}) AND "
    indexed = [t for t in terms if pg_windows_query(t) is not None]
    for term in (t for t in terms if pg_windows_query(t) is None):   # (İ, Σ: read with the ILIKE alone)
        sql = d.query(f"SELECT s.id FROM {rows} WHERE {among}{document} {d.ilike} {d.p} ESCAPE '\\'")
        for row in store.query(sql, [like_pattern(term)]):
            found[term].add(row["id"])
    for start in range(0, len(indexed), _TERMS_PER_STATEMENT):
        chunk = indexed[start:start + _TERMS_PER_STATEMENT]
        values = ", ".join(f"({d.p}::int, {d.p}::text, {d.p}::text)" for _ in chunk)
        params = [p for n, term in enumerate(chunk) for p in (n, pg_windows_query(term), like_pattern(term))]
        restricted = "" if own else f" WHERE x.id IN (SELECT id FROM {candidates})"
        sql = d.query(f"SELECT t.n AS n, x.id AS id FROM (VALUES {values}) AS t(n, q, p) CROSS JOIN LATERAL "
                      f"(SELECT s.id FROM {rows} WHERE {windows} @@ lower(t.q)::tsquery "
                      f"AND {document} {d.ilike} t.p ESCAPE '\\') AS x{restricted}")

        def op(db, sql=sql, params=params):
            db.conn.execute(d.write("SET LOCAL enable_seqscan = off"))
            return db.conn.execute(sql, params).fetchall()
        for n, record_id in store.write(op):
            found[chunk[n]].add(record_id)
    return found


def term_ids(store, record_type: RecordType, terms: list[str], candidates: str) -> dict[str, set[int]]:
    """The candidates (ids in the temporary table `candidates`) holding each term: exactly
    the rows the term's ILIKE selects among them, read from the windows index."""
    own = _own_index(store, record_type, candidates)
    if own:
        _index_candidates(store, record_type, candidates)
    else:
        _merge_pending(store, record_type)
    return _term_ids(store, record_type, list(dict.fromkeys(terms)), candidates, own)
