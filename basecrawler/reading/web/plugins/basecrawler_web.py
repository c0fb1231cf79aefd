"""Datasette plugin for basecrawler's `browse`: the tables of record types, read from their
declarations (basecrawler/recordtypes); no record type is named here.

- Opens on data: `/` goes to the home table (browse.py picks the type with the most records);
  a type's table page without a column choice redirects to the same query with the type's
  default columns (?_bc_all=1 shows every column).
- Search: `?_search=` runs the CLI's own text condition (basecrawler.reading.search) where it covers the
  table, so terms of 1–2 characters (燃料, 브레) fall back to LIKE exactly as `basecrawler search`
  does; other types search their declared text columns with LIKE. A page that only searches,
  in the default order, walks the newest-first index testing each row for a term in a large
  share of the records (`plan_terms`: the same rows, found within a few hundred instead of
  sorting all of them); over a large table its count comes from the search's one-pass summary
  (reading/summary.py, kept by reading/summary_cache.py, shared with the facets; `_nocount` spares Datasette's own count).
- Cells and cards: plugins/basecrawler_cards.py; groups of publishers: plugins/basecrawler_groups.py.
- A Korean search says how many records are translated while some are not (as `search` does).
"""
from __future__ import annotations

import asyncio
import json
import time
import urllib.parse

from cachetools import LRUCache
from datasette import hookimpl
from datasette.filters import FilterArguments

from basecrawler import i18n
from basecrawler.i18n import gettext as _
from basecrawler.reading.browse import PLUGIN_NAME, types_by_table
from basecrawler.errors import ConfigError
from basecrawler.reading.search import (RecallFilter, build_query, has_korean, indexed_search, plan_terms,
                                       short_index, short_terms, text_conditions, translation_progress)
from basecrawler.reading import summary_cache
from basecrawler.reading.summary_cache import cached_summary
from basecrawler.reading.web import admission, limits
from basecrawler.reading.web.facetcache import asked_again
from basecrawler.reading.web.groups import COPIES_ARG, copies_condition, hides_copies, shows_copies

# A search over a table larger than this shows the count of its one-pass summary (the one its
# facets come from) instead of Datasette's own count query, which re-runs the search: seconds
# at a million records. Smaller tables count as Datasette does.
SUMMARY_COUNT_ROWS = 50_000
RARE_SHORT_WAIT_S = 2.0   # a rare 1–2 character term's page waits this long for the pass that finds it

ALL_COLUMNS_ARG = "_bc_all"   # ?_bc_all=1: every column (Datasette ignores unknown _ arguments)
TYPES = types_by_table()


def _config(datasette) -> dict:
    return datasette.plugin_config(PLUGIN_NAME) or {}


# ---- search --------------------------------------------------------------------------------
def _named(sql: str, params: list) -> tuple[str, dict]:
    """build_query's positional `?` parameters as named ones, which Datasette's filters need.
    Safe: the SQL it builds has no `?` inside string literals."""
    names = {}
    parts = sql.split("?")
    out = [parts[0]]
    for n, (part, value) in enumerate(zip(parts[1:], params)):
        name = f"bc_search_{n}"
        names[name] = value
        out.append(f":{name}{part}")
    return "".join(out), names


def _cli_search_covers(table: str) -> bool:
    """Whether basecrawler.reading.search's query reads `table` (then the web answers like the
    CLI, from the type's full-text index): every type that declares one."""
    return indexed_search(TYPES.get(table))


def _like_search(table: str, text: str) -> tuple[str, dict]:
    """Every word in some declared text column of the type (any length, any script)."""
    record_type = TYPES[table]
    columns = record_type.text_index_columns or record_type.original_columns
    clauses, params = [], {}
    for n, word in enumerate(text.split()):
        params[f"bc_word_{n}"] = "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        clauses.append("(" + " OR ".join(f"[{c}] LIKE :bc_word_{n} ESCAPE '\\'" for c in columns) + ")")
    return " AND ".join(clauses) or "1 = 1", params


@hookimpl(trylast=True)  # run after Datasette's own search filter so our extra_context wins
def filters_from_request(request, database, table, datasette):
    if table not in TYPES:
        return None
    text = (request.args.get("_search") or "").strip()
    context = {"supports_search": True, "search": text}
    if not text:
        return FilterArguments([], extra_context=context)
    description = _('search: "%(text)s"', text=text)
    if not _cli_search_covers(table):
        where, params = _like_search(table, text)
        return _with_groups(datasette, database, table, text,
                            FilterArguments([where], params, [description], {**context, "bc_search_note": description}),
                            request.args, request)
    # (all_copies as the page shows them: the summary counts what the page lists)
    filters = RecallFilter(text=text, record_type=TYPES[table].name, all_copies=shows_copies(request.args))
    try:
        sql, params = build_query(filters, columns="r.id", ordered=False)
    except ConfigError as exc:   # a search too large for the engine: say so, find nothing
        return FilterArguments(["0 = 1"], {}, [_("search not run: %(reason)s", reason=exc)],
                               {**context, "bc_search_note": _("search not run: %(reason)s", reason=exc)})
    where, named = _named(sql, params)
    where = f"id IN ({where})"

    async def conditions():
        nonlocal where, named
        db = datasette.get_database(database)
        note = description
        if not (request.args.get("_sort") or request.args.get("_sort_desc")):
            # In the default order, also with other filters: a page of the newest matches is
            # found walking the date index (a common term tested on each row), not by
            # collecting every match first (`id IN (…)` of a million ids, then the filter).
            def plan(conn):
                return plan_terms(conn, filters), short_index(conn, filters.declaration())
            walk, grams = await db.execute_fn(plan)
            where, named = _named(*text_conditions(filters, walk=walk, alias=f"[{table}]", grams=grams))
            if request.args.get("_nocount") and _search_only(request.args.keys()):
                # A rare 1–2 character term the index's vocabulary cannot list (a store whose
                # index is not padded yet, a cased letter outside ASCII) needs a pass.
                rare_short = bool(short_terms(filters, grams) - walk)
                wait = RARE_SHORT_WAIT_S if rare_short else summary_cache.SUMMARY_WAIT_S
                await summary_cache.run_marker(datasette, database, table, request)   # (in the page's lane)
                with limits.in_background():
                    summary = await cached_summary(datasette, database, table, filters, wait, request=request)
                if summary is not None:
                    note += " (" + i18n.ngettext("%(num)s record", "%(num)s records", summary.count) + ")"
                else:   # read meanwhile: the page's script shows them when they are ready
                    note += " " + _("(counting… the counts and facets follow in a few seconds)")
                if rare_short and summary is not None and summary.ids is not None:
                    # The summary's pass found them: the page reads them by id.
                    where, named = "id IN (SELECT value FROM json_each(:bc_ids))", {"bc_ids": json.dumps(summary.ids)}
                elif rare_short and summary is None:
                    # Only a pass over every record finds a 1–2 character term few of them hold,
                    # longer than a page may take: the pass goes on, the page says so.
                    where, named = "0 = 1", {}
                    note += " — " + _("still searching: a term of 1–2 characters that few records hold is looked "
                                      "for in every record; reload in a few seconds")
        if request.args.get("_nocount") and not _search_only(request.args.keys()):
            note += " " + _("(not counted: counting a search with other filters over this many records takes "
                            "longer than a page may)")
        if has_korean(text):
            # As the CLI says it: Korean words only find rows the translator has reached.
            translated, total = await _translation_progress(datasette, database, table, filters, request)
            if translated < total:
                note += " " + _("(Korean words only find translated records: %(done)s of %(total)s translated)",
                                done=i18n.number(translated), total=i18n.number(total))
        still = where == "0 = 1" and bool(request.args.get("_nocount"))   # the page's script reloads it
        arguments = FilterArguments([where], named, [note], {**context, "bc_search_note": note, "bc_still_searching": still})
        return await _with_groups(datasette, database, table, text, arguments, request.args, request)
    return conditions()


PROGRESS_KEPT = 256
_progress: LRUCache = LRUCache(PROGRESS_KEPT)   # (database, table, filters but the text, data version) → …


async def _translation_progress(datasette, database: str, table: str, filters: RecallFilter, request):
    """`translation_progress` of the filters but the text, kept per data version and minute: every Korean
    search of a page with the same filters (a new one from each attacker) reads the same
    count, which read the translated records' index at every search."""
    from dataclasses import replace

    rest = replace(filters, text=None)
    key = (database, table, rest, await summary_cache.run_marker(datasette, database, table, request),
           int(time.time() // GROUP_COUNTS_TTL_S))   # (the translator changes it between runs too)
    if key not in _progress:
        db = datasette.get_database(database)
        _progress[key] = await db.execute_fn(lambda conn: translation_progress(conn, rest))
    return _progress[key]


GROUP_CAP = 10_000   # a type's matches are counted up to this many ("10,000+")
# Each type's count on a search page stops after this long (that type is left out of the line):
# a 1–2 character term is a LIKE over every row here, seconds at a million records (#34.6).
GROUP_COUNT_LIMIT_MS = 250


def _type_matches_sql(record_type, text: str, hide_copies: bool = False, grams: bool = False) -> tuple[str, dict]:
    """The id query of `text` over a type's table (the CLI's search where it covers the table);
    `hide_copies`: each group of publishers counted once (web/groups.py); `grams`: the type's
    padded index lists 1–2 character terms (`short_index`: read from its vocabulary, not by a
    LIKE over every row, which a new rare 2-character search paid once per type, to its limit)."""
    if _cli_search_covers(record_type.table):
        return _named(*build_query(RecallFilter(text=text, record_type=record_type.name), columns="r.id", ordered=False,
                                   hide_copies=hide_copies, grams=grams))
    where, named = _like_search(record_type.table, text)
    if hide_copies:
        where = f"({where}) AND {copies_condition(record_type, record_type.table)}"
    return f"SELECT id FROM [{record_type.table}] WHERE {where}", named


GROUP_COUNTS_KEPT = 256   # (type, search, data version) → its count: a search seen again costs no count
# The other types' data version is not read per page (a page reads its own table's once): their
# counts are kept at most this long, as a version lasts while a run is going.
GROUP_COUNTS_TTL_S = 60
_group_counts: LRUCache = LRUCache(GROUP_COUNTS_KEPT)
# A returning search's count that did not finish within the page's limit is finished for its
# next visitor as the start-up warm-up's kind of work (admission.WARMING: one at a time, at the
# background's priority), at most this many waiting at once, within Datasette's page limit.
GROUP_COUNTS_FINISHING = 2
FINISH_LIMIT_MS = 3000
_finishing: dict[tuple, asyncio.Task] = {}


async def _type_count(db, database: str, record_type, text: str, args, version: tuple,
                      again: bool = False) -> int | None:
    """How many records of `record_type` the search matches (capped), kept per `version`;
    None when it could not be counted within GROUP_COUNT_LIMIT_MS (not kept: tried again). A
    search asked `again` has it finished for its next visit (`_finish_later`), and does not
    count it itself meanwhile: a reader's common term ("choking" in most product alerts) ran its
    count to the page's limit on every visit under attack, and its page stayed slow."""
    counting = None   # (key, sql, params) once the count is asked
    try:
        def plan(conn):   # (every read connection has the vocabulary: prepare_connection)
            return hides_copies(conn, record_type, args), _cli_search_covers(record_type.table) and \
                short_index(conn, record_type)
        hide, grams = await db.execute_fn(plan)
        key = (database, record_type.table, text, hide, version)
        if key in _group_counts:
            return _group_counts[key]   # (asked again: among the last to drop)
        if key in _finishing:
            return None
        matches, params = _type_matches_sql(record_type, text, hide, grams)
        counting = (key, f"SELECT count(*) AS n FROM ({matches} LIMIT {GROUP_CAP + 1})", params)
        found = (await db.execute(*counting[1:], custom_time_limit=GROUP_COUNT_LIMIT_MS)).first()["n"]
    except Exception:   # too large for the engine, timed out: that type is left out of the line
        if again and counting is not None:
            _finish_later(db, *counting)
        return None
    _group_counts[key] = found
    return found


def _finish_later(db, key: tuple, sql: str, params) -> None:
    if key in _finishing or len(_finishing) >= GROUP_COUNTS_FINISHING:
        return

    async def count():
        try:
            _group_counts[key] = (await db.execute(sql, params, custom_time_limit=FINISH_LIMIT_MS)).first()["n"]
        except Exception:   # left out again; the next visit of the search tries again
            pass
        finally:
            _finishing.pop(key, None)
    with admission.as_warm_up():   # (not its page's lane)
        _finishing[key] = asyncio.get_running_loop().create_task(count())


async def search_groups(datasette, database: str, table: str, text: str, args=None, request=None,
                        clock=time.time) -> list[dict]:
    """One search over every type: per type table with matches, its title, count (capped) and
    the same search on its page ("차량 리콜 3 · 제품 경보 2"); the page's own type first. Each
    group of publishers counts once unless the page shows every copy (`?_bc_copies=1`). The
    types are counted at once (one after the other, three 2-character LIKE counts each up to
    their limit kept a page waiting their sum)."""
    db = datasette.get_database(database)
    present = set(await db.table_names())
    args = args or {}
    types = [(t, rt) for t, rt in TYPES.items() if t in present]
    # The page's own table's data version (read once per request), and the time for the others'.
    version = (await summary_cache.run_marker(datasette, database, table, request)
               if table in present else None, int(clock() // GROUP_COUNTS_TTL_S))
    again = asked_again(request)
    counts = await asyncio.gather(*(_type_count(db, database, rt, text, args, version, again) for _, rt in types))
    groups = []
    for (other_table, record_type), found in zip(types, counts):
        if found is None:
            continue
        if found or other_table == table:
            groups.append({"table": other_table, "title": _(record_type.title), "count": found,
                           "capped": found > GROUP_CAP, "current": other_table == table,
                           "url": datasette.urls.table(database, other_table) + "?" + urllib.parse.urlencode(
                               {"_search": text, **({COPIES_ARG: "1"} if shows_copies(args) else {})})})
    return sorted(groups, key=lambda g: (not g["current"], -g["count"]))


async def _with_groups(datasette, database, table, text, arguments: FilterArguments, args=None,
                       request=None) -> FilterArguments:
    arguments.extra_context["bc_search_groups"] = await search_groups(datasette, database, table, text, args,
                                                                      request)
    return arguments


@hookimpl
def prepare_connection(conn, database, datasette):
    """Every read connection gets the temporary vocabulary of each type's padded full-text
    index (a 1–2 character search reads it, basecrawler/reading/search.py): the page's
    queries run on whichever connection is free."""
    for record_type in TYPES.values():
        try:
            short_index(conn, record_type)
        except Exception:   # not a store of ours, or no such table here
            pass


def _search_only(keys) -> bool:
    """No argument that narrows the rows besides `_search` (a column filter, a facet
    selection `_bcf_…`, `_where`)."""
    return not any(not k.startswith("_") or k.startswith("_bcf_") or k in ("_where", "_filter_column") for k in keys)


# ---- opening on data -----------------------------------------------------------------------
def default_columns_location(path: str, query_string: bytes, defaults: dict[str, list[str]]) -> str | None:
    """Where to send a request for a type's HTML table page that chose no columns: the same
    query plus the type's default column set. None when the request is served as it is (JSON
    and other formats, other tables, a column choice or ?_bc_all=1 present)."""
    parts = path.split("/")
    if len(parts) != 3 or parts[2] not in defaults:
        return None
    pairs = urllib.parse.parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
    if any(key in ("_col", "_nocol", ALL_COLUMNS_ARG) for key, _ in pairs):
        return None
    return f"{path}?{urllib.parse.urlencode(pairs + [('_col', c) for c in defaults[parts[2]]])}"


def _redirect_location(datasette, scope) -> str | None:
    if scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD"):
        return None
    config = _config(datasette)
    if scope["path"] == "/" and config.get("home"):
        query = (scope.get("query_string") or b"").decode("latin-1")   # `?_lang=en` goes along
        return config["home"] + (f"?{query}" if query else "")
    return default_columns_location(scope["path"], scope.get("query_string") or b"",
                                    config.get("default_columns") or {})


async def _spares_count(datasette, scope) -> bool:
    """Whether this request is a search page (HTML or JSON) of a large type table whose count
    Datasette does not run: one that only searches takes it from the search's summary (in the
    page's description); one that also filters is not counted, and says so (counting every
    match of a common term that also passes a filter took longer than the page's target)."""
    if scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD"):
        return False
    parts = scope["path"].split("/")
    if len(parts) == 3 and parts[2].endswith(".json"):
        parts[2] = parts[2][: -len(".json")]
    if len(parts) != 3 or parts[2] not in TYPES or not _cli_search_covers(parts[2]):
        return False
    pairs = urllib.parse.parse_qsl((scope.get("query_string") or b"").decode("latin-1"), keep_blank_values=True)
    keys = [k for k, _ in pairs]
    only = _search_only(keys)
    if not dict(pairs).get("_search", "").strip() or "_nocount" in keys or \
            (only and ("_sort" in keys or "_sort_desc" in keys)):
        return False
    try:
        db = datasette.get_database(urllib.parse.unquote(parts[1]))
        top = (await db.execute(f"SELECT max(rowid) AS n FROM [{parts[2]}]")).first()["n"] or 0
    except Exception:   # not a database of ours: Datasette answers as it would
        return False
    # (a search-only page's summary leaves out the copies the page leaves out: reading/summary.py)
    return top > SUMMARY_COUNT_ROWS


@hookimpl
def asgi_wrapper(datasette):
    def wrap(app):
        async def open_on_data(scope, receive, send):
            location = _redirect_location(datasette, scope)
            if location is None:
                if await _spares_count(datasette, scope):
                    scope = {**scope, "query_string": (scope.get("query_string") or b"") + b"&_nocount=1"}
                await app(scope, receive, send)
                return
            await send({"type": "http.response.start", "status": 302,
                        "headers": [(b"location", location.encode("latin-1")), (b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b""})
        return open_on_data
    return wrap


# Served by `datasette --static bc-static:basecrawler/reading/web/static` (see basecrawler/reading/browse.py).
@hookimpl
def extra_css_urls(datasette):
    return [datasette.urls.path("/bc-static/basecrawler.css")]


@hookimpl
def extra_js_urls(datasette):
    return [datasette.urls.path("/bc-static/basecrawler.js")]
