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
- Cells: the best-text column shows the record's best text (the declaration's `display` chain:
  Korean when translated, else the original, with the original beside it); a link only for an
  http(s) URL, anything else as text.
- Cards: `bc_card(table, row)` for templates/row.html (fields, labels, texts from `card`).
- A Korean search says how many records are translated while some are not (as `search` does).
"""
from __future__ import annotations

import json
import urllib.parse

import markupsafe
from datasette import hookimpl
from datasette.filters import FilterArguments

from basecrawler import i18n
from basecrawler.i18n import gettext as _
from basecrawler.reading.browse import PLUGIN_NAME, best_text_column, http_url, types_by_table
from basecrawler.errors import ConfigError
from basecrawler.reading.search import (RecallFilter, build_query, has_korean, plan_terms, short_index,
                                       short_terms, text_conditions, translation_progress)
from basecrawler.reading import summary_cache
from basecrawler.reading.summary_cache import cached_summary, search_covers

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
    """Whether basecrawler.reading.search's query reads `table` (then the web answers like the CLI)."""
    return search_covers(table)


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
                            FilterArguments([where], params, [description], {**context, "bc_search_note": description}))
    filters = RecallFilter(text=text, record_type=TYPES[table].name)
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
        if _search_only(request.args.keys()) and not (request.args.get("_sort") or request.args.get("_sort_desc")):
            def plan(conn):
                return plan_terms(conn, filters), short_index(conn, filters.declaration())
            walk, grams = await db.execute_fn(plan)
            where, named = _named(*text_conditions(filters, walk=walk, alias=f"[{table}]", grams=grams))
            if request.args.get("_nocount"):
                # A rare 1–2 character term the index's vocabulary cannot list (a store whose
                # index is not padded yet, a cased letter outside ASCII) needs a pass.
                rare_short = bool(short_terms(filters, grams) - walk)
                wait = RARE_SHORT_WAIT_S if rare_short else summary_cache.SUMMARY_WAIT_S
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
        if has_korean(text):
            # As the CLI says it: Korean words only find rows the translator has reached.
            translated, total = await db.execute_fn(lambda conn: translation_progress(conn, filters))
            if translated < total:
                note += " " + _("(Korean words only find translated records: %(done)s of %(total)s translated)",
                                done=i18n.number(translated), total=i18n.number(total))
        still = where == "0 = 1" and bool(request.args.get("_nocount"))   # the page's script reloads it
        arguments = FilterArguments([where], named, [note], {**context, "bc_search_note": note, "bc_still_searching": still})
        return await _with_groups(datasette, database, table, text, arguments)
    return conditions()


GROUP_CAP = 10_000   # a type's matches are counted up to this many ("10,000+")


def _type_matches_sql(record_type, text: str) -> tuple[str, dict]:
    """The id query of `text` over a type's table (the CLI's search where it covers the table)."""
    if _cli_search_covers(record_type.table):
        return _named(*build_query(RecallFilter(text=text, record_type=record_type.name), columns="r.id", ordered=False))
    where, named = _like_search(record_type.table, text)
    return f"SELECT id FROM [{record_type.table}] WHERE {where}", named


async def search_groups(datasette, database: str, table: str, text: str) -> list[dict]:
    """One search over every type: per type table with matches, its title, count (capped) and
    the same search on its page ("차량 리콜 3 · 제품 경보 2"); the page's own type first."""
    db = datasette.get_database(database)
    present = set(await db.table_names())
    groups = []
    for other_table, record_type in TYPES.items():
        if other_table not in present:
            continue
        try:
            sql, params = _type_matches_sql(record_type, text)
            found = (await db.execute(f"SELECT count(*) AS n FROM ({sql} LIMIT {GROUP_CAP + 1})", params)).first()["n"]
        except Exception:   # too large for the engine, timed out: that type is left out of the line
            continue
        if found or other_table == table:
            groups.append({"table": other_table, "title": _(record_type.title), "count": found,
                           "capped": found > GROUP_CAP, "current": other_table == table,
                           "url": datasette.urls.table(database, other_table) + "?" + urllib.parse.urlencode({"_search": text})})
    return sorted(groups, key=lambda g: (not g["current"], -g["count"]))


async def _with_groups(datasette, database, table, text, arguments: FilterArguments) -> FilterArguments:
    arguments.extra_context["bc_search_groups"] = await search_groups(datasette, database, table, text)
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
        return config["home"]
    return default_columns_location(scope["path"], scope.get("query_string") or b"",
                                    config.get("default_columns") or {})


async def _summary_counts(datasette, scope) -> bool:
    """Whether this request is a page (HTML or JSON) of a large type table that only searches
    (its count then comes from the search's summary, in the page's description)."""
    if scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD"):
        return False
    parts = scope["path"].split("/")
    if len(parts) == 3 and parts[2].endswith(".json"):
        parts[2] = parts[2][: -len(".json")]
    if len(parts) != 3 or parts[2] not in TYPES or not _cli_search_covers(parts[2]):
        return False
    pairs = urllib.parse.parse_qsl((scope.get("query_string") or b"").decode("latin-1"), keep_blank_values=True)
    keys = [k for k, _ in pairs]
    if not dict(pairs).get("_search", "").strip() or "_nocount" in keys or not _search_only(keys) \
            or "_sort" in keys or "_sort_desc" in keys:
        return False
    try:
        db = datasette.get_database(urllib.parse.unquote(parts[1]))
        top = (await db.execute(f"SELECT max(rowid) AS n FROM [{parts[2]}]")).first()["n"] or 0
    except Exception:   # not a database of ours: Datasette answers as it would
        return False
    return top > SUMMARY_COUNT_ROWS


@hookimpl
def asgi_wrapper(datasette):
    def wrap(app):
        async def open_on_data(scope, receive, send):
            location = _redirect_location(datasette, scope)
            if location is None:
                if await _summary_counts(datasette, scope):
                    scope = {**scope, "query_string": (scope.get("query_string") or b"") + b"&_nocount=1"}
                await app(scope, receive, send)
                return
            await send({"type": "http.response.start", "status": 302,
                        "headers": [(b"location", location.encode("latin-1")), (b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b""})
        return open_on_data
    return wrap


# ---- cells ---------------------------------------------------------------------------------
def _short_url(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc or url


def link_or_text(value):
    """An http(s) URL as a short link; any other value (javascript:, data: …) as plain text."""
    url = http_url(value)
    if url is None:
        return markupsafe.Markup('<span class="bc-not-a-link">{}</span>').format(value)
    return markupsafe.Markup('<a class="bc-source" href="{}" rel="noopener noreferrer">{} ↗</a>').format(url, _short_url(url))


def best_text_html(record_type, row: dict):
    korean, original = record_type.best_text(row)
    lang = row.get("source_lang") or ""
    base = next((b for b in record_type.display if row.get(f"{b}_original") or row.get(f"{b}_ko")), None)
    parts = []
    if base is not None and base != record_type.display[0]:
        # The first choice is empty: say which field is shown (e.g. a JP recall's cause).
        parts.append(markupsafe.Markup('<span class="bc-field-name">{}</span>').format(_(record_type.label(f"{base}_original"))))
    if korean:
        parts.append(markupsafe.Markup('<div class="bc-ko" lang="ko">{}</div>').format(korean))
    if original:
        parts.append(korean_first(None, original, lang, block=True) if not korean else
                     markupsafe.Markup('<div class="bc-original" lang="{}">{}</div>').format(lang, original))
    return markupsafe.Markup("").join(parts)


def korean_first(korean, original, lang: str, *, block: bool = False):
    """A translated field as a cell: the Korean, the original one line below; untranslated,
    the original with a small "awaiting translation" mark (never an empty Korean column)."""
    tag = "div" if block else "span"
    if korean:
        return markupsafe.Markup('<{0} class="bc-ko" lang="ko">{1}</{0}><{0} class="bc-original" lang="{2}">{3}</{0}>').format(
            tag, korean, lang, original or "")
    if not original:
        return None
    return markupsafe.Markup('<{0} class="bc-original bc-untranslated" lang="{1}"><span class="bc-pending">{2}</span> {3}</{0}>'
                             ).format(tag, lang, _("awaiting translation"), original)


def listed(value) -> str | None:
    """A multi-valued field's JSON list as the words it holds ("Food, Children")."""
    try:
        items = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return None
    return ", ".join(str(item) for item in items) if isinstance(items, list) else None


def unknown_date(record_type, value) -> bool:
    """A date cell that holds no real date: empty, or the type's sentinel (1970-01-01)."""
    sentinel = record_type.date_sentinel.isoformat() if record_type.date_sentinel else None
    return value in (None, "") or (sentinel is not None and str(value).startswith(sentinel))


@hookimpl
def render_cell(row, value, column, table, database, datasette):
    record_type = TYPES.get(table)
    if record_type is None:
        return None
    if column in record_type.url_fields:
        return link_or_text(value) if value else None
    if column == record_type.date_field and unknown_date(record_type, value):
        return markupsafe.Markup('<span class="bc-date-unknown">{}</span>').format(_("date unknown"))
    if column == record_type.date_field or column in record_type.date_columns:
        return i18n.date(value) if value else None
    if column.endswith("_original") and column[: -len("_original")] in record_type.translated and value:
        async def pair():
            # Korean first, the original under it: the row holds only the columns on screen.
            db = datasette.get_database(database)
            found = (await db.execute(f"SELECT [{column[: -len('_original')]}_ko] AS ko, source_lang FROM [{table}] "
                                      "WHERE id = ?", [row["id"]])).first()
            return korean_first(found["ko"] if found else None, value, (found["source_lang"] if found else "") or "")
        return pair
    if isinstance(value, int) and not isinstance(value, bool) and column != "id" and column not in record_type.key:
        return i18n.number(value)
    facet = record_type.facet(column)
    if facet is not None and facet.multi and value:
        words = listed(value)
        return None if words is None else words
    if column == best_text_column(record_type):
        async def best():
            # The row holds only the columns on screen: fetch the display chain by id.
            wanted = ", ".join(f"[{b}_original], [{b}_ko]" for b in record_type.display)
            db = datasette.get_database(database)
            found = (await db.execute(f"SELECT {wanted}, source_lang FROM [{table}] WHERE id = ?", [row["id"]])).first()
            return best_text_html(record_type, dict(found) if found else {})
        return best
    return None


# ---- the card ------------------------------------------------------------------------------
def card(table: str, row) -> dict | None:
    """What templates/row.html shows for a record of a type: heading (what was recalled, the
    declaration's `heading`, Korean first), its number, facts, texts, links; labels in the
    reader's language."""
    record_type = TYPES.get(table)
    if record_type is None or row is None:
        return None
    row = dict(row) if isinstance(row, dict) else dict(zip(row.keys(), tuple(row)))   # a sqlite3.Row
    facts, texts, links = [], [], []
    for name in record_type.card:
        if name in record_type.translated:
            original, korean = row.get(f"{name}_original"), row.get(f"{name}_ko")
            if (original or korean) and name not in record_type.heading:
                texts.append({"field": name, "label": _(record_type.label(f"{name}_original")),
                              "original": original, "korean": korean})
        elif name in record_type.url_fields:
            if row.get(name):
                links.append({"label": _(record_type.label(name)), "url": http_url(row[name]), "text": row[name]})
        elif name == record_type.date_field and (row.get("date_unknown") or unknown_date(record_type, row.get(name))):
            facts.append({"label": _(record_type.label(name)), "value": _("date unknown")})
        elif name in record_type.heading or name in record_type.key:
            continue   # in the heading or the number line
        elif record_type.facet(name) is not None and record_type.facet(name).multi:
            if row.get(name) not in (None, "", "[]"):
                facts.append({"label": _(record_type.label(name)), "value": listed(row[name]) or row[name]})
        elif row.get(name) not in (None, ""):
            facts.append({"label": _(record_type.label(name)), "value": _fact(record_type, name, row[name])})
    for facet in record_type.facets:   # facet values the card does not show otherwise (e.g. a normalised key)
        if facet.field not in record_type.card and row.get(facet.field) not in (None, ""):
            facts.append({"label": _(record_type.label(facet.field)), "value": row[facet.field]})
    title, title_original = heading(record_type, row)
    number = " · ".join(f"{_(record_type.label(k))} {row.get(k)}" for k in record_type.key
                        if row.get(k) not in (None, "") and k not in record_type.heading)
    return {"title": title, "title_original": title_original, "number": number,
            "type": _(record_type.title), "lang": row.get("source_lang") or "",
            "facts": facts, "texts": texts, "links": links}


def _fact(record_type, name: str, value):
    if isinstance(value, bool) or name == "archived":
        return _("yes") if value else _("no")
    if isinstance(value, int):
        return i18n.number(value)
    if name in record_type.date_columns:
        return i18n.date(value)
    return value


def heading(record_type, row: dict) -> tuple[str, str | None]:
    """(the heading, the original beneath it when the heading is Korean): the declared
    `heading` fields joined, each translated one in Korean where translated; else the best text."""
    shown, originals, translated = [], [], False
    for name in record_type.heading:
        if name in record_type.translated:
            korean, original = row.get(f"{name}_ko"), row.get(f"{name}_original")
            translated = translated or bool(korean)
            shown.append(korean or original)
            originals.append(original)
        else:
            shown.append(row.get(name))
            originals.append(row.get(name))
    words = " ".join(str(v) for v in shown if v not in (None, ""))
    if not words:
        korean, original = record_type.best_text(row)
        words, translated, originals = korean or original or "", bool(korean), [original]
    beneath = " ".join(str(v) for v in originals if v not in (None, "")) if translated else None
    return (words or " ".join(str(row.get(k) or "") for k in record_type.key).strip()), beneath or None


def facet_label(table: str, name: str) -> str | None:
    record_type = TYPES.get(table)
    facet = record_type.facet(name) if record_type else None
    return facet.label if facet else None


async def same_recall(datasette, database: str, table: str, row_id) -> list[dict]:
    """Records of any type, from any source, that carry the same publisher number in the same
    country (`same_as_field`): the same recall published twice, linked and never merged."""
    record_type = TYPES.get(table)
    if record_type is None or not record_type.same_as_field:
        return []
    db = datasette.get_database(database)
    this = (await db.execute(f"SELECT country, [{record_type.same_as_field}] AS number FROM [{table}] WHERE id = ?",
                             [row_id])).first()
    if this is None or not this["number"]:
        return []
    present = set(await db.table_names())
    found = []
    for other_table, other in TYPES.items():
        if not other.same_as_field or other_table not in present:
            continue
        rows = await db.execute(f"SELECT id, source FROM [{other_table}] WHERE country = ? AND "
                                f"[{other.same_as_field}] = ? AND NOT (? = '{other_table}' AND id = ?) LIMIT 20",
                                [this["country"], this["number"], table, row_id])
        found += [{"url": datasette.urls.row(database, other_table, str(r["id"])),
                   "label": f"{_(other.title)} · {_('Source')} {r['source']} · {this['number']}"} for r in rows.rows]
    return found


@hookimpl
def extra_template_vars(view_name, table, database, request, datasette):
    context = {"bc_card": card, "bc_facet_label": facet_label, "bc_same_recall": []}
    if view_name != "row" or table not in TYPES or request is None:
        return context

    async def with_same_recall():
        row_id = request.url_vars.get("pks")
        if row_id and row_id.isdigit():
            context["bc_same_recall"] = await same_recall(datasette, database, table, int(row_id))
        return context
    return with_same_recall


# Served by `datasette --static bc-static:basecrawler/reading/web/static` (see basecrawler/reading/browse.py).
@hookimpl
def extra_css_urls(datasette):
    return [datasette.urls.path("/bc-static/basecrawler.css")]


@hookimpl
def extra_js_urls(datasette):
    return [datasette.urls.path("/bc-static/basecrawler.js")]
