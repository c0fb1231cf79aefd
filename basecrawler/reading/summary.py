"""What a search matched, counted in one pass: how many records, and per declared facet the
records per stored value, and per month of the date field (#23.5).

A search page shows its count and every facet. Counted one query per facet, a term in a
million records costs a second or more per facet (each re-runs the search); read once, the
matching rows' facet columns give all of them together. The web view keeps the result per
search and data version (reading/summary_cache.py), so a page
seen before answers from it.

The counts are the ones the facet queries give (`facetcounts.values_sql`, `months_sql`): a
multi-valued facet counts each element of its JSON list (a value that is not JSON counts as
itself), a month is the first seven characters of a known date after the sentinel.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from functools import partial

from basecrawler.reading import facetcounts
from basecrawler.reading.facetcounts import (known_months, months_sql, shown_table, stored_counts, unknown_sql,
                                             values_sql, whole_table)
from basecrawler.recordtypes.declaration import DATE_UNKNOWN
from basecrawler.recordtypes.tables import facet_index_columns, index_name
from basecrawler.store.engines.dialect import SQLITE

from basecrawler.reading.search import (TRIGRAM, RecallFilter, build_query, fts_phrase, fts_table, hides_copies,
                                       short_index, short_terms, text_conditions)
from basecrawler.store import groups



@dataclass
class SearchSummary:
    count: int = 0
    values: dict[str, dict] = field(default_factory=dict)    # facet field → stored value → records
    months: dict[str, int] = field(default_factory=dict)     # YYYY-MM → records
    date_unknown: int = 0
    ids: list[int] | None = None   # the matching records' ids, when there are at most IDS_MAX

    def value_rows(self, column: str) -> list[dict]:
        """The facet query's rows for `column`: [{"value", "count"}]."""
        return [{"value": v, "count": n} for v, n in self.values.get(column, {}).items()]

    def month_rows(self) -> list[dict]:
        """The month facet's rows, newest month first."""
        return [{"value": m, "count": n} for m, n in sorted(self.months.items(), reverse=True)]


IDS_MAX = 10_000   # a summary keeps the ids of a search that matched at most this many records
MATCHED = "temp.bc_matched"   # the matching rows' facet columns, for the length of one summary
SPLIT_ROWS = 20_000   # a summary reading more records than this counts its id range in parts …
PARTS = 2             # … this many at once in the web view (sqlite3 lets go of Python's lock while a statement steps)
_LAST_ID = 2 ** 63 - 1


def summarise(conn, filters: RecallFilter, parts: int = 1) -> SearchSummary:
    """Count, facet values and months of the records `filters` selects (SQLite: its
    statements are SQLITE's, engines/dialect.py). The
    matching rows' facet columns are read once into a temporary table (the connection's own;
    the database is only read) and counted there with the facet queries' own SQL, so the
    work stays in SQLite and off Python's lock, which the web view's event loop needs. They
    are read from the type's narrow facet index (recordtypes/tables.py `facet_index_columns`),
    not the wide rows. A large result is counted in `parts` ranges of ids and added up: here
    one after the other, in the web view at once on two connections (`summarise_in`).

    A single term of 3+ characters in more than half of a large table is counted the other
    way round when the last run kept the whole table's counts: the whole table's counts less
    those of the records without the term (`_less`), which reads the smaller share."""
    steps = _steps(filters, parts)
    results = None
    try:
        while True:
            results = [job(conn) for job in steps.send(results)]
    except StopIteration as done:
        return done.value


async def summarise_in(db, filters: RecallFilter, parts: int = PARTS) -> SearchSummary:
    """`summarise` on a Datasette database: each step's parts at once in its thread pool, each
    on a connection of its own (a part's temporary table is its connection's)."""
    steps = _steps(filters, parts)
    results = None
    try:
        while True:
            jobs = steps.send(results)
            results = list(await asyncio.gather(*(db.execute_fn(job) for job in jobs)))
    except StopIteration as done:
        return done.value


def _steps(filters: RecallFilter, parts: int):
    """The summary as steps: yields the jobs (functions of a connection) of one step, which
    may run at once, receives their results, and returns the summary."""
    record_type = filters.declaration()
    terms = sorted({t for t in filters.terms() if len(t) >= TRIGRAM}) if record_type.text_index_columns else []
    [(kept, top, total, indexed, hide)] = yield [lambda conn: _start(conn, record_type, filters, bool(terms))]
    spans = _spans(top, parts)
    found: dict[str, int] = {}
    if terms:   # how many records hold each term, each part of the ids counted at once
        counted = yield [partial(_term_counts, record_type=record_type, terms=terms, span=span) for span in spans]
        found = {t: sum(c[t] for c in counted) for t in terms}
    # A term every record holds changes nothing ANDed with the rest: counted from the table's
    # indexes (a component heading every record has).
    filters = replace(filters, text=" ".join(t for t in filters.terms() if len(t) < TRIGRAM or found[t] != total)
                      or None)
    whole_kept = filters == RecallFilter(record_type=filters.record_type) and kept is not None
    the_rest = kept is not None and _one_term(filters) and 2 * found.get(filters.text, 0) > kept.count \
        and found[filters.text] > IDS_MAX
    if (whole_kept or the_rest) and hide:   # the shown records' kept counts, else the kept counts less the copies'
        [shown] = yield [partial(_kept_whole_table, record_type=record_type, shown=True)]
        if shown is None:   # (kept by an older version: the copies read for their facets, 10 % of the rows)
            [copies] = yield [partial(_copies_counted, record_type=record_type)]
            shown = _less(kept, copies)
        kept = shown
    if whole_kept:
        return kept
    if the_rest:
        rest = yield [partial(_count_rest, record_type=record_type, term=filters.text, indexed=indexed, span=span,
                              hide=hide) for span in spans]
        return _less(kept, _added(rest))
    driver = _driver(filters)
    if driver is not None:
        counted = yield [partial(_count_matching, filters=filters, driver=driver, indexed=indexed, span=span, hide=hide)
                         for span in (spans if found[driver] > SPLIT_ROWS else [None])]
        return _added(counted)
    # Nothing narrows the rows: one view of the table, counted through its indexes.
    whole = filters == RecallFilter(record_type=filters.record_type)
    counted = yield [partial(_count_query, filters=filters, span=span, hide=hide) for span in ([None] if whole else spans)]
    return _added(counted)


def _start(conn, record_type, filters: RecallFilter, counts_terms: bool) -> tuple:
    """(the kept whole-table summary or None, the last id, the number of records when a term
    must be compared with it, whether the facet index is there, whether copies are left out:
    False, True, or the name of the shown records' id index). The kept summary and `total`
    count every record, as a term's count from the full-text index does."""
    kept = _kept_whole_table(conn, record_type)
    table = record_type.table
    top = conn.execute(SQLITE.query(f"SELECT max(rowid) FROM [{table}]")).fetchone()[0] or 0
    total = kept.count if kept is not None else \
        conn.execute(SQLITE.query(f"SELECT count(*) FROM [{table}]")).fetchone()[0] if counts_terms else None
    indexed = conn.execute(SQLITE.query("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?"),
                           [_facet_index(record_type)]).fetchone() is not None
    hide = hides_copies(conn, filters)
    if hide:   # (the shown records' id index, when this store has it: its name)
        shown_ids = groups.copy_indexes(record_type)[0].name
        hide = shown_ids if conn.execute(SQLITE.query("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?"),
                                         [shown_ids]).fetchone() else True
    return kept, top, total, indexed, hide


def _copies_counted(conn, record_type) -> SearchSummary:
    """The summary of the records that are another publisher's copy (few: the flag's own index)."""
    copies = f'SELECT {_selected(record_type)} FROM [{record_type.table}] AS r WHERE r."{groups.FLAG}" IS NOT NULL'
    return _counted(conn, record_type, copies, [], keep_ids=False)


def _shown(record_type, hide: bool | str, indexed: bool) -> str:
    """The condition (ANDed) that leaves other publishers' copies out, when they are (`hide`:
    True, or the name of the shown records' id index). A read through the facet index (which
    has no flag) asks that index for each row, a seek in a narrow index, instead of reading
    the wide row for its flag."""
    if not hide:
        return ""
    if not (indexed and isinstance(hide, str)):
        return f" AND {groups.hidden_copies_condition(record_type, alias='r')}"
    shown_ids = hide
    return (f" AND EXISTS (SELECT 1 FROM [{record_type.table}] AS shown INDEXED BY [{shown_ids}] "
            f"WHERE shown.id = r.id AND {groups.hidden_copies_condition(record_type, alias='shown')})")


def _spans(top: int, parts: int) -> list[tuple[int, int] | None]:
    """`parts` ranges of ids together holding every id (None: one part, no range)."""
    if parts <= 1 or top <= SPLIT_ROWS:
        return [None]
    bounds = [-_LAST_ID] + [top * n // parts for n in range(1, parts)] + [_LAST_ID]
    return [(low + 1 if n else low, high) for n, (low, high) in enumerate(zip(bounds, bounds[1:]))]


def _in_span(column: str, span, params: list) -> str:
    if span is None:
        return ""
    params.extend(span)
    return f" AND {column} BETWEEN ? AND ?"


def _facet_index(record_type) -> str:
    return index_name(record_type, facet_index_columns(record_type))


def _indexed_by(record_type, indexed: bool) -> str:
    # The planner reads the wide rows by their id on its own; the facet index holds what a
    # summary reads in a tenth of the bytes (a store not opened by a writer since lacks it).
    return f" INDEXED BY [{_facet_index(record_type)}]" if indexed else ""


def _term_counts(conn, record_type, terms: list[str], span) -> dict[str, int]:
    fts = fts_table(record_type)
    counts = {}
    for term in terms:
        params = [fts_phrase(term)]
        spanned = _in_span("rowid", span, params)
        counting = SQLITE.query(f"SELECT count(*) FROM [{fts}] WHERE [{fts}] MATCH ?{spanned}")
        counts[term] = conn.execute(counting, params).fetchone()[0]
    return counts


def _driver(filters: RecallFilter) -> str | None:
    """The first term of 3+ characters of a search that is only text: its full-text index
    drives the summary's read."""
    record_type = filters.declaration()
    if not record_type.text_index_columns or replace(filters, text=None) != RecallFilter(record_type=filters.record_type):
        return None
    return next((t for t in filters.terms() if len(t) >= TRIGRAM), None)


def _count_matching(conn, filters: RecallFilter, driver: str, indexed: bool, span, hide: bool = False) -> SearchSummary:
    """The summary of the records (ids in `span`) a text-only search matches, read through the
    full-text index of its term `driver` joined to the facet index."""
    record_type = filters.declaration()
    fts = fts_table(record_type)
    params = [fts_phrase(driver)]
    where = f"[{fts}] MATCH ?" + _in_span(f"[{fts}].rowid", span, params)
    others = list(filters.terms())
    others.remove(driver)
    if others:
        grams = short_index(conn, record_type)
        rest = replace(filters, text=" ".join(others))
        condition, more = text_conditions(rest, walk=short_terms(rest, grams), alias="r", grams=grams)
        where += f" AND {condition}"
        params += more
    sql = (f"SELECT {_selected(record_type)} FROM [{fts}] JOIN [{record_type.table}] AS r"
           f"{_indexed_by(record_type, indexed)} ON r.id = [{fts}].rowid WHERE {where}{_shown(record_type, hide, indexed)}")
    return _counted(conn, record_type, sql, params)


def _count_rest(conn, record_type, term: str, indexed: bool, span, hide: bool = False) -> SearchSummary:
    """The summary of the records (ids in `span`) that do not hold `term`."""
    fts = fts_table(record_type)
    params: list = []
    outer = _in_span("r.id", span, params)
    params.append(fts_phrase(term))
    inner = _in_span("rowid", span, params)
    sql = (f"SELECT {_selected(record_type)} FROM [{record_type.table}] AS r{_indexed_by(record_type, indexed)} "
           f"WHERE 1{outer}{_shown(record_type, hide, indexed)} "
           f"AND (r.id IN (SELECT rowid FROM [{fts}] WHERE [{fts}] MATCH ?{inner})) IS NOT 1")
    return _counted(conn, record_type, sql, params, keep_ids=False)


def _count_query(conn, filters: RecallFilter, span=None, hide: bool = False) -> SearchSummary:
    """The summary of any other search (ids in `span`), read as `build_query` reads it."""
    record_type = filters.declaration()
    grams = short_index(conn, record_type)
    sql, params = build_query(filters, columns=_selected(record_type), ordered=False, driven=True,
                              walk=short_terms(filters, grams), grams=grams, hide_copies=bool(hide))
    if span is not None:   # (flattened: the range reads the table's ids)
        sql = f"SELECT * FROM ({sql}) WHERE 1" + _in_span("bc_id", span, params)
    return _counted(conn, record_type, sql, params)


def _added(parts: list[SearchSummary]) -> SearchSummary:
    """One summary of parts that share no record."""
    if len(parts) == 1:
        return parts[0]
    total = SearchSummary(count=sum(p.count for p in parts), date_unknown=sum(p.date_unknown for p in parts))
    for part in parts:
        for field, values in part.values.items():
            into = total.values.setdefault(field, {})
            for value, n in values.items():
                into[value] = into.get(value, 0) + n
        for month, n in part.months.items():
            total.months[month] = total.months.get(month, 0) + n
    if total.count <= IDS_MAX and all(p.ids is not None for p in parts):
        total.ids = [i for p in parts for i in p.ids]
    return total


def _one_term(filters: RecallFilter) -> bool:
    """Whether `filters` is one text term of 3+ characters and nothing else."""
    terms = filters.terms()
    return len(terms) == 1 and len(terms[0]) >= TRIGRAM and \
        replace(filters, text=None) == RecallFilter(record_type=filters.record_type) and filters.text == terms[0]


def _selected(record_type) -> str:
    """The matching rows' columns a summary counts: id, every facet, the date and its flag."""
    selected = ["r.id AS bc_id", *(f"r.[{f.field}] AS [{f.field}]" for f in record_type.facets)]
    if record_type.date_field:
        unknown = f"COALESCE(r.[{DATE_UNKNOWN}], 0)" if record_type.date_optional else "0"
        selected += [f"r.[{record_type.date_field}] AS bc_date", f"{unknown} AS bc_unknown"]
    return ", ".join(selected)


def _counted(conn, record_type, sql: str, params: list, keep_ids: bool = True) -> SearchSummary:
    """The summary of the rows `sql` (selecting `_selected` columns) returns."""
    _drop(conn)
    if params:
        conn.execute(SQLITE.write(f"CREATE TABLE {MATCHED} AS {sql}"), params)
    else:   # nothing narrows the table: count it through its own indexes (a view is flattened)
        conn.execute(SQLITE.write(f"CREATE VIEW {MATCHED} AS {sql}"))
    try:
        summary = SearchSummary()
        # The facet queries' own SQL (facetcounts.py) over the matching rows, so a summary
        # counts exactly as a facet does.
        for facet in record_type.facets:
            counted = values_sql(facet.field, facet.multi, f"SELECT * FROM {MATCHED}")
            summary.values[facet.field] = dict(conn.execute(SQLITE.query(counted)).fetchall())
        # Every record once in a single-valued facet's counts (NULL is a value there too).
        single = next((f.field for f in record_type.facets if not f.multi), None)
        summary.count = sum(summary.values[single].values()) if single is not None else \
            conn.execute(SQLITE.query(f"SELECT count(*) FROM {MATCHED}")).fetchone()[0]
        if keep_ids and summary.count <= IDS_MAX:
            summary.ids = [row[0] for row in conn.execute(SQLITE.query(f"SELECT bc_id FROM {MATCHED}"))]
        if record_type.date_field:
            dated = f"SELECT bc_date AS [{record_type.date_field}], bc_unknown AS [{DATE_UNKNOWN}] FROM {MATCHED}"
            months = SQLITE.query(months_sql(record_type.date_field, dated, known_only=True))
            summary.months = dict(conn.execute(months).fetchall())
            summary.date_unknown = conn.execute(SQLITE.query(unknown_sql(dated))).fetchone()[0]
        return summary
    finally:
        _drop(conn)


def _less(whole: SearchSummary, rest: SearchSummary) -> SearchSummary:
    """The counts of `whole` less those of `rest`, a part of it (values and months that drop
    to nothing are gone, as a count over the remaining records would not list them)."""
    def minus(a: dict, b: dict) -> dict:
        return {k: n - b.get(k, 0) for k, n in a.items() if n - b.get(k, 0) > 0}

    return SearchSummary(count=whole.count - rest.count,
                         values={f: minus(v, rest.values.get(f, {})) for f, v in whole.values.items()},
                         months=minus(whole.months, rest.months), date_unknown=whole.date_unknown - rest.date_unknown)


def _kept_whole_table(conn, record_type, shown: bool = False) -> SearchSummary | None:
    """The summary of the whole table (`shown`: of the records other publishers' copies leave,
    kept beside it for a type with copies) from the facet counts the last run kept for this
    data version (reading/facetcounts.py), when there are any and the table is too large for
    ids: a term every record holds then costs no count at all."""
    rows = stored_counts(conn, record_type.table, facetcounts.data_marker(conn, record_type.table))
    if rows is None:
        return None
    source = shown_table(record_type.table) if shown else whole_table(record_type.table)
    try:
        summary = SearchSummary()
        for facet in record_type.facets:
            summary.values[facet.field] = {r["value"]: r["count"] for r in rows[values_sql(facet.field, facet.multi, source)]}
        # Every record once in a single-valued facet's counts (a NULL is a value there too):
        # the whole table's count, which counting the table took 0.3–0.5 s at a million.
        single = next((f for f in record_type.facets if not f.multi), None)
        summary.count = sum(summary.values[single.field].values()) if single is not None else \
            conn.execute(SQLITE.query(f"SELECT count(*) FROM ({source})")).fetchone()[0]
        if summary.count <= IDS_MAX:
            return None
        date = record_type.date_field
        if date and record_type.date_optional:
            months = known_months(rows[months_sql(date, source, known_only=False)],
                                  rows[months_sql(date, source, known_only=False, undated_only=True)])
            summary.date_unknown = rows[unknown_sql(source)][0]["n"]
        elif date:
            months = rows[months_sql(date, source, known_only=False)]
        summary.months = {r["value"]: r["count"] for r in months} if date else {}
    except KeyError:   # kept by another version of the facet queries
        return None
    return summary


def _drop(conn) -> None:
    name = MATCHED.split(".")[1]
    for (kind,) in conn.execute(SQLITE.query("SELECT type FROM temp.sqlite_master WHERE name = ?"), [name]).fetchall():
        conn.execute(SQLITE.write(f"DROP {kind.upper()} {MATCHED}"))


__all__ = ["SearchSummary", "summarise", "summarise_in"]
