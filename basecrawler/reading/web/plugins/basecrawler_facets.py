"""Datasette facets that follow a record type's declaration (browse.py puts them in the
metadata; no record type is named here).

- `values` ({"values": "country"}): every declared `Facet`, headed by its label. A stored value
  that expands into several facet values (`expand`: the model-year range "2019-2021" counts
  under 2019, 2020 and 2021) or a column holding several (`multi`: a JSON list) is selected with
  `_bcf_<field>=<value>`, which `filters_from_request` turns into a condition on the stored
  values that expand to it; a plain one with Datasette's own `field=value` filter.
- `month` ({"month": <the date field>}): records per YYYY-MM of the date field, plus "date unknown"
  for records whose date could not be read (`date_unknown = 1`) as a value of its own — never
  counted under the sentinel date 1970-01-01. Datasette facets by day only.

A page that only searches (`?_search=` and no other filter) takes its facets from one pass
over the matching records (basecrawler/reading/summary.py), kept per search and data version
(basecrawler/reading/summary_cache.py): counting each facet with its own query re-ran the
search per facet, seconds at a million records. One not counted within
`summary_cache.SUMMARY_WAIT_S` shows its facets as timed out; the page's script
(static/basecrawler.js) asks `summary_state` until they are counted and puts them in place.
The searches slow to count are counted again when a run changed the data
(`summary_cache.keep_fresh`, started with the warm-up).

Counts are cached per crawl run (#23.5): a facet's counts over a whole table change only when a
run stores records, so they are counted once per run (with a generous time limit, and ahead of
the first visitor at start-up) instead of on every page, in the background: a page waits for
them only within its facets' budget and shows the rest as still counting; while a run is going the cache lasts a
minute. Counts over a filtered page are cached the same way but keep Datasette's time limit;
one that runs out of time is finished in the background for the page's next visitor.
"""
from __future__ import annotations

import asyncio
import json

from datasette import hookimpl
from datasette.database import QueryInterrupted
from datasette.facets import Facet
from datasette.filters import FilterArguments
from datasette.utils import path_with_added_args, path_with_removed_args

from basecrawler.i18n import gettext as _
from basecrawler.reading.browse import types_by_table
from basecrawler.reading.facetcounts import (known_months, months_sql, unknown_sql, values_sql,
                                             whole_table)
from basecrawler.reading.search import RecallFilter
from basecrawler.reading import summary_cache
from basecrawler.reading.web import admission, groupcounts, limits
from basecrawler.reading.web.facetcache import (asked_again, cached, count_once, finish_later, kept_counts, pending,
                                                timed_out)
from basecrawler.reading.summary_cache import cached_summary, keep_fresh, run_marker, search_covers
from basecrawler.reading.web.groups import shown_source, shows_copies
from basecrawler.reading.web.pageargs import search_only as only_searches, whole_table as shows_whole

TYPES = types_by_table()
SELECT_PREFIX = "_bcf_"            # ?_bcf_<facet field>=<value>
DATE_UNKNOWN = "date unknown"
WHOLE_TABLE_LIMIT_MS = 20_000      # counting a whole table once per run may take this long
BACKGROUND_LIMIT_MS = 10_000       # a filtered page's count that ran out of time, finished later
# Every facet of one filtered page counts within this much time together, not each within
# Datasette's facet limit: seven facets timing out one after the other kept a page 1.4 s. The
# rest show as still counting and are finished in the background for the next visitor.
PAGE_FACETS_BUDGET_S = 0.3
MIN_FACET_LIMIT_MS = 20            # less than this left: not started, finished in the background
POLL_WAIT_S = 1.0                  # the page's script asks for them again after at most this long
SUMMARY_PATH = "/-/bc-summary"     # + /<database>/<table>?_search=…: whether its counts are ready


def search_only(request, table: str) -> RecallFilter | None:
    """The search of a page that only searches a type's table (a term and nothing else that
    narrows it: no column filter, no facet selection, no `_where`; copies as the page shows them), else None."""
    declared = TYPES.get(table)
    if declared is None or request is None or not only_searches(request.args) or not search_covers(table):
        return None
    return RecallFilter(text=request.args.get("_search").strip(), record_type=declared.name,
                        all_copies=shows_copies(request.args))


def _column(config: dict) -> str:
    return config.get("simple") or config.get("column")


class _DeclaredFacet(Facet):
    async def suggest(self):
        return []

    def _toggle(self, key: str, value: str) -> tuple[str, bool]:
        selected = (key, value) in self.get_querystring_pairs()
        path = (path_with_removed_args(self.request, {key: value}) if selected
                else path_with_added_args(self.request, {key: value}))
        return self.ds.absolute_url(self.request, self.ds.urls.path(path)), selected

    def _result(self, source_and_config, column: str, values: list, truncated: bool) -> dict:
        declared = TYPES.get(self.table)
        facet = declared.facet(column) if declared else None
        return {
            # Headed by the declared label (templates/_facet_results.html), else "name (type)".
            "name": column, "type": self.type, "label": facet.label if facet else None,
            "hideable": source_and_config["source"] != "metadata",
            "toggle_url": self.ds.urls.path(path_with_removed_args(self.request, {f"_facet_{self.type}": column})),
            "results": values, "truncated": truncated,
        }

    async def _summary(self):
        """The search-only page's one-pass counts (None: not a search-only page); raises
        QueryInterrupted while they are still being counted (shown as timed out, finished in
        the background for the next visit)."""
        filters = search_only(self.request, self.table)
        if filters is None:
            return None
        await run_marker(self.ds, self.database, self.table, self.request)   # (the page's, in its lane)
        with limits.in_background():
            summary = await cached_summary(self.ds, self.database, self.table, filters,
                                           summary_cache.SUMMARY_WAIT_S, request=self.request)
        if summary is None:
            raise QueryInterrupted(None, "", {})
        return summary

    async def _page_source(self) -> tuple[bool, str]:
        """(whether the page shows its whole table, what its facet queries count), decided from
        the page's arguments (reading/web/pageargs.py), not from the SQL Datasette built: the
        page's rows; or for a page of the whole table the table itself whatever its columns or
        which page of it, so every such page (and the start-up warm-up, and the counts a run
        kept, basecrawler/reading/facetcounts.py) shares one count; or for one that leaves other
        publishers' copies out (plugins/basecrawler_groups.py) the shown records, counted from
        their own indexes once per run (or kept by it) like the whole table's."""
        if self.request is None or not shows_whole(self.request.args):
            return False, self.sql
        declared = TYPES.get(self.table)
        if declared is not None and await groupcounts.hides_copies(self.ds, self.database, declared, self.request):
            return True, shown_source(declared, self.table)
        return True, whole_table(self.table)

    async def _rows(self, sql: str, whole: bool) -> list[dict]:
        """The facet query's rows, from the per-run cache when this run already counted them,
        or for the whole table (`whole`) from the counts the run kept when it ended. A
        whole-table count may take long (once per run); a filtered page's count keeps
        Datasette's facet time limit, and when it runs out the count goes on in the background
        so the next visitor of that page sees it."""
        marker = await run_marker(self.ds, self.database, self.table, self.request)
        params = {} if whole else self.params
        key = (self.database, sql, json.dumps(params, sort_keys=True, default=str), marker)
        again = asked_again(self.request)   # (its counts are kept apart: facetcache)
        found = cached(key, again)
        if found is not None:
            return found
        if whole:
            kept = await kept_counts(self.ds, self.database, self.table, marker)
            if kept is not None and sql in kept:
                return kept[sql]
            # Counted once per run in the background; a page waits only what is left of its
            # budget (a multi-valued facet of a million records takes seconds to count, and
            # every page of the table waited for it until it was cached).
            return await self._within_budget(_whole_count(self.ds, key, sql), sql, params)
        if again and key in timed_out:   # (a returning page does not wait again for what ran out)
            finish_later(self.ds, key, sql, self.params, BACKGROUND_LIMIT_MS, again)
            raise QueryInterrupted(None, sql, self.params)
        if key in pending:
            # Another visit's count of it is going on: waited for within the page's budget
            # only (it was awaited to its end, seconds on a loaded machine).
            return await self._within_budget(pending[key], sql, self.params)
        try:
            limit_ms = min(self.ds.setting("facet_time_limit_ms"), self._budget_left_ms())
            if limit_ms < MIN_FACET_LIMIT_MS:
                raise QueryInterrupted(None, sql, self.params)
            return await count_once(self.ds, key, sql, self.params, limit_ms, again=again)
        except QueryInterrupted:
            timed_out[key] = True
            finish_later(self.ds, key, sql, self.params, BACKGROUND_LIMIT_MS, again)
            raise

    async def _within_budget(self, work, sql: str, params) -> list[dict]:
        """`work`'s rows if it ends within what is left of the page's budget, else
        QueryInterrupted (it goes on for the next visitor)."""
        try:
            return await asyncio.wait_for(asyncio.shield(work), max(0, self._budget_left_ms()) / 1000)
        except asyncio.TimeoutError:
            raise QueryInterrupted(None, sql, params) from None

    def _budget_left_ms(self) -> int:
        """What is left of the page's `PAGE_FACETS_BUDGET_S` (started by its first facet count)."""
        loop = asyncio.get_running_loop()
        scope = self.request.scope if self.request is not None else {}
        ends = scope.setdefault("bc_facets_end", loop.time() + PAGE_FACETS_BUDGET_S)
        return int((ends - loop.time()) * 1000)


class MonthFacet(_DeclaredFacet):
    """Facet a date column by month: `{"month": <the date field>}` in the table's facets."""

    type = "month"

    async def facet_results(self):
        results, timed_out = [], []
        declared = TYPES.get(self.table)
        may_be_unknown = declared is not None and declared.date_optional
        for source_and_config in self.get_configs():
            column = _column(source_and_config["config"])
            size = self.get_facet_size()
            whole, source = await self._page_source()
            try:
                summary = await self._summary()
                unknown = 0
                if summary is not None:
                    rows, unknown = summary.month_rows()[: size + 1], summary.date_unknown
                elif whole and may_be_unknown:
                    # Every month from the date index, less the few undated records' months
                    # (the straight count read every row for its date_unknown flag).
                    rows = known_months(await self._rows(months_sql(column, source, known_only=False), whole),
                                        await self._rows(months_sql(column, source, known_only=False,
                                                                    undated_only=True), whole))[: size + 1]
                elif whole:   # the query a run keeps the counts of (no LIMIT)
                    rows = (await self._rows(months_sql(column, source, known_only=False), whole))[: size + 1]
                else:
                    rows = await self._rows(months_sql(column, source, known_only=may_be_unknown, filtered=True)
                                            + f" LIMIT {size + 1}", whole)
                if summary is None and may_be_unknown:
                    unknown = (await self._rows(unknown_sql(source), whole))[0]["n"]
            except QueryInterrupted:
                timed_out.append(column)
                continue
            values = []
            for row in rows[:size]:
                url, selected = self._toggle(f"{column}__startswith", row["value"])
                values.append({"value": row["value"], "label": row["value"], "count": row["count"],
                               "toggle_url": url, "selected": selected})
            if unknown:
                url, selected = self._toggle("date_unknown", "1")
                values.append({"value": DATE_UNKNOWN, "label": DATE_UNKNOWN, "count": unknown,
                               "toggle_url": url, "selected": selected})
            result = self._result(source_and_config, column, values, len(rows) > size)
            if declared is not None:
                result["label"] = _("%(label)s by month", label=_(declared.label(column)))
            results.append(result)
        return results, timed_out


def _facet_values(facet, stored) -> list[str]:
    """The facet values one stored value counts under."""
    if stored is None or stored == "":
        return []
    return [str(v) for v in facet.expand(stored)] if facet.expand else [str(stored)]


class ValuesFacet(_DeclaredFacet):
    """A declared facet: counts per value, a range or a list counted under each of its values."""

    type = "values"

    async def facet_results(self):
        results, timed_out = [], []
        declared = TYPES.get(self.table)
        for source_and_config in self.get_configs():
            column = _column(source_and_config["config"])
            facet = declared.facet(column) if declared else None
            if facet is None:
                continue
            try:
                summary = await self._summary()
                if summary is not None:
                    rows = summary.value_rows(column)
                else:
                    whole, source = await self._page_source()
                    rows = await self._rows(values_sql(column, facet.multi, source, filtered=not whole), whole)
            except QueryInterrupted:
                timed_out.append(column)
                continue
            counts: dict[str, int] = {}
            for row in rows:
                for value in set(_facet_values(facet, row["value"])):
                    counts[value] = counts.get(value, 0) + row["count"]
            size = self.get_facet_size()
            # A ranged facet's values are ordered (model years): newest first, not by count.
            ranked = sorted(counts.items(), key=(lambda item: item[0]) if facet.ranged else
                            (lambda item: (-item[1], item[0])), reverse=facet.ranged)
            values = []
            for value, count in ranked[:size]:
                plain = not (facet.expand or facet.multi)
                url, selected = self._toggle(column if plain else f"{SELECT_PREFIX}{column}", value)
                values.append({"value": value, "label": value, "count": count, "toggle_url": url, "selected": selected})
            results.append(self._result(source_and_config, column, values, len(ranked) > size))
        return results, timed_out


async def _warm(datasette) -> None:
    """Count every type's facets over its whole table, before anyone asks (from the counts a
    run kept when they are current, else counted), as background work (admission.WARMING)."""
    admission.WARMING.set(True)   # (this task's own context: the counts it starts inherit it)
    for database in list(datasette.databases):
        if database == "_internal":
            continue
        names = await datasette.get_database(database).table_names()
        for table in (t for t in names if t in TYPES):
            try:
                # (only the facets: the count of a grouped table would test every row)
                await datasette.client.get(f"/{database}/{table}.json?_size=0&_extra=facet_results&_nocount=1")
                if _whole_counts:   # one table's counts after the other (the machine is shared)
                    await asyncio.wait(list(_whole_counts.values()))
            except Exception:   # a cold cache only costs the first visitor time
                pass


_warmed_loops: list = []
_background: set = set()   # the loop keeps only weak references to its tasks
_whole_counts: dict[tuple, "asyncio.Task"] = {}   # a whole-table facet count going on, by its cache key


def _whole_count(datasette, key: tuple, sql: str) -> "asyncio.Task":
    """The whole-table count of `key` as a task of its own (started when none is), which goes
    on when the page that asked stops waiting."""
    if key not in _whole_counts:
        task = _whole_counts[key] = asyncio.get_running_loop().create_task(
            count_once(datasette, key, sql, [], WHOLE_TABLE_LIMIT_MS, whole=True))
        task.add_done_callback(lambda t: (_whole_counts.pop(key, None), t.cancelled() or t.exception()))
    return _whole_counts[key]


@hookimpl
def asgi_wrapper(datasette):
    """Start the warm-up in the loop that serves: `datasette serve` runs the startup hooks in a
    loop of their own that stops before the server starts, so a task made there never ran (the
    first visitor counted everything). The server's first ASGI call (its lifespan start, or
    the first request in-process) starts it once per loop."""
    def wrap(app):
        async def warming(scope, receive, send):
            loop = asyncio.get_running_loop()
            if loop not in _warmed_loops:
                _warmed_loops[:] = [loop]
                for job in (_warm(datasette), keep_fresh(datasette)):
                    task = loop.create_task(job)
                    task.add_done_callback(lambda t: t.cancelled() or t.exception())
                    _background.add(task)
                    task.add_done_callback(_background.discard)
            await app(scope, receive, send)
        return warming
    return wrap


async def summary_state(request, datasette):
    """The page's script asks here (SUMMARY_PATH/<database>/<table>?_search=…) whether the
    counts of a search page that showed without them are ready: {"ready": true, "count": n}
    once they are (the page then reads its facets again), else {"ready": false} after waiting
    up to POLL_WAIT_S for them. Counting starts here too when no page started it (a server
    restarted since the page was made)."""
    from datasette.utils.asgi import Response

    database, table = request.url_vars["database"], request.url_vars["table"]
    filters = search_only(request, table)
    if database not in datasette.databases or filters is None:
        return Response.json({"ready": False, "error": "not a search of a record type's table"}, status=404)
    with limits.in_background():   # (a poll with a new search starts its count: the background's slots)
        summary = await cached_summary(datasette, database, table, filters, POLL_WAIT_S, request=request,
                                       own_wait=True)
    return Response.json({"ready": True, "count": summary.count} if summary is not None else {"ready": False},
                         headers={"Cache-Control": "no-store"})


@hookimpl
def register_routes():
    return [(SUMMARY_PATH + r"/(?P<database>[^/]+)/(?P<table>[^/]+)$", summary_state)]


@hookimpl
def register_facet_classes():
    return [MonthFacet, ValuesFacet]


@hookimpl
def filters_from_request(request, database, table, datasette):
    """`_bcf_<field>=<value>`: the records with a stored value that counts under `value`."""
    declared = TYPES.get(table)
    if declared is None:
        return None
    chosen = [(key[len(SELECT_PREFIX):], value) for key in request.args.keys() if key.startswith(SELECT_PREFIX)
              for value in request.args.getlist(key)]
    chosen = [(declared.facet(field), value) for field, value in chosen if declared.facet(field)]
    if not chosen:
        return None

    async def conditions():
        db = datasette.get_database(database)
        wheres, params, descriptions = [], {}, []
        marker = await run_marker(datasette, database, table, request)
        for n, (facet, value) in enumerate(chosen):
            # The stored values (counted once per run, like the facets) that count under `value`.
            sql = values_sql(facet.field, facet.multi, whole_table(table))
            key = (database, sql, "[]", marker)
            kept = await kept_counts(datasette, database, table, marker)
            stored = cached(key) or (kept or {}).get(sql) or \
                await count_once(datasette, key, sql, [], WHOLE_TABLE_LIMIT_MS, whole=True)
            matching = [row["value"] for row in stored if value in _facet_values(facet, row["value"])]
            name = f"bcf_{n}"
            params[name] = json.dumps(matching)
            if facet.multi:
                wheres.append(f"EXISTS (SELECT 1 FROM json_each(CASE WHEN json_valid([{facet.field}]) THEN [{facet.field}] "
                              f"ELSE json_array([{facet.field}]) END) AS e WHERE e.value IN (SELECT value FROM json_each(:{name})))")
            else:
                wheres.append(f"[{facet.field}] IN (SELECT value FROM json_each(:{name}))")
            descriptions.append(_("%(label)s is %(value)s", label=_(facet.label), value=value))
        return FilterArguments(wheres, params, descriptions, {"bc_facet_notes": descriptions})
    return conditions()
