"""What a search matched, counted in one pass: how many records, and per declared facet the
records per stored value, and per month of the date field (#23.5).

A search page shows its count and every facet. Counted one query per facet, a term in a
million records costs a second or more per facet (each re-runs the search); read once, the
matching rows' facet columns give all of them together. The web view keeps the result per
search and data version (basecrawler/reading/web/plugins/basecrawler_facets.py), so a page
seen before answers from it.

The counts are the ones the facet queries give (`facetcounts.values_sql`, `months_sql`): a
multi-valued facet counts each element of its JSON list (a value that is not JSON counts as
itself), a month is the first seven characters of a known date after the sentinel.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from dataclasses import replace

from basecrawler.reading.facetcounts import months_sql, unknown_sql, values_sql
from basecrawler.recordtypes.declaration import DATE_UNKNOWN

from basecrawler.reading.search import (TRIGRAM, RecallFilter, build_query, fts_phrase, fts_table, short_index,
                                       short_terms, text_conditions)


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


def summarise(conn, filters: RecallFilter) -> SearchSummary:
    """Count, facet values and months of the records `filters` selects (SQLite). The
    matching rows' facet columns are read once into a temporary table (the connection's own;
    the database is only read) and counted there with the facet queries' own SQL, so the
    work stays in SQLite and off Python's lock, which the web view's event loop needs.

    A single term of 3+ characters in more than half of a large table is counted the other
    way round when the last run kept the whole table's counts: the whole table's counts less
    those of the records without the term (`_complement`), which reads the smaller share."""
    record_type = filters.declaration()
    kept = _kept_whole_table(conn, record_type)
    filters, found = _without_terms_in_every_record(conn, filters, None if kept is None else kept.count)
    if filters == RecallFilter(record_type=filters.record_type) and kept is not None:
        return kept
    grams = short_index(conn, record_type)
    walk = short_terms(filters, grams)
    if kept is not None and _one_term(filters) and 2 * found.get(filters.text, 0) > kept.count \
            and found[filters.text] > IDS_MAX:
        condition, params = text_conditions(filters, walk=walk, alias="r", grams=grams)
        rest = _counted(conn, record_type, f"SELECT {_selected(record_type)} FROM [{record_type.table}] AS r "
                                           f"WHERE ({condition}) IS NOT 1", params, keep_ids=False)
        return _less(kept, rest)
    sql, params = build_query(filters, columns=_selected(record_type), ordered=False, driven=True,
                              walk=walk, grams=grams)
    return _counted(conn, record_type, sql, params)


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
        conn.execute(f"CREATE TABLE {MATCHED} AS {sql}", params)
    else:   # nothing narrows the table: count it through its own indexes (a view is flattened)
        conn.execute(f"CREATE VIEW {MATCHED} AS {sql}")
    try:
        summary = SearchSummary(count=conn.execute(f"SELECT count(*) FROM {MATCHED}").fetchone()[0])
        if keep_ids and summary.count <= IDS_MAX:
            summary.ids = [row[0] for row in conn.execute(f"SELECT bc_id FROM {MATCHED}")]
        # The facet queries' own SQL (facetcounts.py) over the matching rows, so a summary
        # counts exactly as a facet does.
        for facet in record_type.facets:
            counted = values_sql(facet.field, facet.multi, f"SELECT * FROM {MATCHED}")
            summary.values[facet.field] = dict(conn.execute(counted).fetchall())
        if record_type.date_field:
            dated = f"SELECT bc_date AS [{record_type.date_field}], bc_unknown AS [{DATE_UNKNOWN}] FROM {MATCHED}"
            summary.months = dict(conn.execute(months_sql(record_type.date_field, dated, known_only=True)).fetchall())
            summary.date_unknown = conn.execute(unknown_sql(dated)).fetchone()[0]
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


def _kept_whole_table(conn, record_type) -> SearchSummary | None:
    """The summary of the whole table from the facet counts the last run kept for this data
    version (reading/facetcounts.py), when there are any and the table is too large for ids:
    a term every record holds then costs no count at all."""
    from basecrawler.reading.facetcounts import data_marker, known_months, months_sql, stored_counts, \
        unknown_sql, values_sql, whole_table

    rows = stored_counts(conn, record_type.table, data_marker(conn, record_type.table))
    if rows is None:
        return None
    source = whole_table(record_type.table)
    try:
        summary = SearchSummary()
        for facet in record_type.facets:
            summary.values[facet.field] = {r["value"]: r["count"] for r in rows[values_sql(facet.field, facet.multi, source)]}
        # Every record once in a single-valued facet's counts (a NULL is a value there too):
        # the whole table's count, which counting the table took 0.3–0.5 s at a million.
        single = next((f for f in record_type.facets if not f.multi), None)
        summary.count = sum(summary.values[single.field].values()) if single is not None else \
            conn.execute(f"SELECT count(*) FROM [{record_type.table}]").fetchone()[0]
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
    for (kind,) in conn.execute("SELECT type FROM temp.sqlite_master WHERE name = ?", [name]).fetchall():
        conn.execute(f"DROP {kind.upper()} {MATCHED}")


def _without_terms_in_every_record(conn, filters: RecallFilter, total: int | None = None
                                   ) -> tuple[RecallFilter, dict[str, int]]:
    """`filters` less the terms of 3+ characters its full-text index finds in every record of
    the table (`total` of them, counted when not given): ANDed with the rest they change
    nothing, and a search for a word every record has (a component heading) is then counted
    from the table's indexes. Also each such term's number of records."""
    record_type = filters.declaration()
    if not record_type.text_index_columns or not any(len(t) >= TRIGRAM for t in filters.terms()):
        return filters, {}
    fts = fts_table(record_type)
    if total is None:
        total = conn.execute(f"SELECT count(*) FROM [{record_type.table}]").fetchone()[0]
    found = {t: conn.execute(f"SELECT count(*) FROM [{fts}] WHERE [{fts}] MATCH ?", [fts_phrase(t)]).fetchone()[0]
             for t in set(filters.terms()) if len(t) >= TRIGRAM}
    kept = [t for t in filters.terms() if len(t) < TRIGRAM or found[t] != total]
    return replace(filters, text=" ".join(kept) or None), found


# ---- kept per search and data version, for the web view ---------------------------------------
def search_covers(table: str) -> bool:
    """Whether the web view answers `?_search=` on `table` with `build_query` (the CLI's own
    search, which the summary runs), rather than its LIKE over another type's columns."""
    sql, _ = build_query(RecallFilter(text="x"), columns="r.id", ordered=False)
    return f"FROM {table} AS r" in sql


SUMMARY_CACHE_SIZE = 64
_summaries: dict[tuple, SearchSummary] = {}
_summarising: dict[tuple, "object"] = {}
_wait_until: dict[tuple, float] = {}   # a running summary is awaited until then, by every asker together


async def run_marker(datasette, database: str, table: str) -> tuple:
    """Changes whenever a run may have changed the table's counts: a run started or finished,
    a record added; the current minute while a run is going (`facetcounts.data_marker`, the
    version a run's kept counts are stamped with)."""
    from basecrawler.reading.facetcounts import data_marker

    db = datasette.get_database(database)
    return tuple(await db.execute_fn(lambda conn: data_marker(conn, table)))


async def cached_summary(datasette, database: str, table: str, filters: RecallFilter,
                         wait_s: float) -> SearchSummary | None:
    """The summary of `filters` over the data as it is now: from the cache when this search
    was summarised since the data last changed, else counted (in Datasette's thread pool,
    once however many pages ask) and awaited up to `wait_s` after it started — None when it
    takes longer; it goes on and the next visit finds it. The wait is counted from the start
    of the count, not per asker: a page asks once for its count and once per facet, and five
    facets waiting 0.3 s each kept a first visit 2 s."""
    import asyncio

    from basecrawler.errors import ConfigError

    key = (database, table, filters, await run_marker(datasette, database, table))
    if key in _summaries:
        return _summaries[key]
    task = _summarising.get(key)
    if task is None:
        def count(conn) -> SearchSummary:
            try:
                return summarise(conn, filters)
            except ConfigError:   # a query too large is not run: it matches nothing
                return SearchSummary()

        async def run() -> SearchSummary:
            try:
                summary = await datasette.get_database(database).execute_fn(count)
                if len(_summaries) >= SUMMARY_CACHE_SIZE:
                    _summaries.pop(next(iter(_summaries)))
                _summaries[key] = summary
                return summary
            finally:
                _summarising.pop(key, None)
                _wait_until.pop(key, None)
        loop = asyncio.get_running_loop()
        _wait_until[key] = loop.time() + wait_s
        task = _summarising[key] = loop.create_task(run())
        task.add_done_callback(lambda t: t.cancelled() or t.exception())   # a failed count is dropped
    remaining = min(wait_s, _wait_until.get(key, 0.0) - asyncio.get_running_loop().time())
    if task.done():
        return None if task.cancelled() or task.exception() else task.result()
    if remaining <= 0:
        return None
    try:
        return await asyncio.wait_for(asyncio.shield(task), remaining)
    except asyncio.TimeoutError:
        return None
__all__ = ["SearchSummary", "summarise", "cached_summary", "run_marker", "search_covers"]
