"""Datasette plugin: the web view in the reader's language (basecrawler/i18n's catalogues).

- Language per request: `?_lang=en|ko` (taken out of the query before Datasette reads it, kept
  in a `bc_lang` cookie), else the cookie, else $BASECRAWLER_LANG, else Korean. It is set for
  the request's context, so templates and the other plugins' cells and notes follow it.
- Templates get gettext (`{{ _("Apply") }}`, Jinja's i18n extension, new style with
  `%(name)s` placeholders) and helpers: numbers and dates as the language writes them, a
  column's declared label, the count line, the description of what the page shows.
No record type is named here: labels and titles come from the declarations, looked up in the
catalogue by their English text.
"""
from __future__ import annotations

import copy
import datetime as dt
import functools
import http.cookies
import re
import urllib.parse

import markupsafe
from datasette import hookimpl

from basecrawler import i18n
from basecrawler.i18n import gettext as _
from basecrawler.reading.browse import COMMON_COLUMN_DESCRIPTIONS, DASHBOARD_PATH, best_text_column, types_by_table
from basecrawler.reading.web.cells import readable

TYPES = types_by_table()
ARG = "_lang"
COOKIE = "bc_lang"
COOKIE_MAX_AGE = 365 * 24 * 3600


# ---- the language of a request ---------------------------------------------------------------
def request_language(query_string: bytes, cookie_header: str | None) -> tuple[str | None, bytes, bool]:
    """(language, the query without `_lang`, whether the language was chosen by this request)."""
    pairs = urllib.parse.parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
    chosen = next((i18n.normal(v) for k, v in pairs if k == ARG), None)
    rest = urllib.parse.urlencode([(k, v) for k, v in pairs if k != ARG]).encode("latin-1") \
        if any(k == ARG for k, _v in pairs) else query_string
    if chosen:
        return chosen, rest, True
    cookie = http.cookies.SimpleCookie()
    try:
        cookie.load(cookie_header or "")
    except http.cookies.CookieError:
        pass
    kept = i18n.normal(cookie[COOKIE].value) if COOKIE in cookie else None
    return kept, rest, False


@hookimpl
def asgi_wrapper(datasette):
    def wrap(app):
        async def in_language(scope, receive, send):
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            headers = dict((k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope.get("headers") or [])
            lang, query, chosen = request_language(scope.get("query_string") or b"", headers.get("cookie"))
            token = i18n.use(lang)

            async def send_with_cookie(message):
                if chosen and message["type"] == "http.response.start":
                    value = f"{COOKIE}={lang}; Path=/; Max-Age={COOKIE_MAX_AGE}; SameSite=Lax"
                    message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", value.encode())]}
                await send(message)
            try:
                await app({**scope, "query_string": query}, receive, send_with_cookie)
            finally:
                i18n.reset(token)
        return in_language
    return wrap


def lang_url(request, lang: str) -> str:
    """This page in `lang`: the same path and query with `_lang` set."""
    pairs = [(k, v) for k, v in urllib.parse.parse_qsl(request.query_string, keep_blank_values=True) if k != ARG]
    return request.path + "?" + urllib.parse.urlencode([*pairs, (ARG, lang)])


# ---- helpers for templates -------------------------------------------------------------------
def column_label(table: str, column: str) -> str:
    """A column's header: the label its type declares, the best-text column as "Text", the
    store's own columns as browse.py describes them, else the column's name."""
    return _column_label(table, column, i18n.language())


def column_labels(table: str, columns) -> dict[str, str]:
    """Every shown column's label, looked up once per page: each cell carries its column's label
    (data-label), and looking it up per cell was a tenth of the server's own work on pages of
    a thousand rows."""
    return {column["name"]: column_label(table, column["name"]) for column in columns}


@functools.lru_cache(maxsize=2048)   # (tables and columns are the store's, languages two)
def _column_label(table: str, column: str, lang: str) -> str:
    record_type = TYPES.get(table)
    if record_type is not None:
        if column == best_text_column(record_type):
            return _("Text", lang)
        if column in record_type.labels:
            return _(record_type.label(column), lang)
    described = COMMON_COLUMN_DESCRIPTIONS.get(column)
    if described:
        return _(described.split(" — ")[0], lang)
    # The store's bookkeeping columns (shown with "every column"), named as the export names them.
    from basecrawler.reading.xlsx import framework_labels

    return framework_labels(lang).get(column) or column


def count_line(count) -> str:
    if count is None or count == "":
        return ""
    return i18n.ngettext("%(num)s record", "%(num)s records", int(count))


def crumb(label: str, index: int) -> str:
    """The crumbs' words: home, the database, a table's title where it is a type."""
    if index == 0:
        return _("home")
    for record_type in TYPES.values():
        if label == record_type.table:
            return _(record_type.title)
    return label


def facet_value(label, facet: str | None = None) -> str:
    """A facet value as shown: the undated records' marker in words, an empty value as "-", a
    country by its name in the reader's language (the code beside it)."""
    if label in (None, ""):
        return "-"
    if str(label) in ("date_unknown", "date unknown"):   # the flag column, the month facet's own value
        return _("date unknown")
    return str(readable(facet, label))


def description(table: str, filters, search_note, sort, sort_desc, facet_notes=None) -> list[str]:
    """What the page's rows are, part by part, in the reader's language (Datasette's own
    description is English only)."""
    parts = []
    lookups = {key: display for key, display, _no in filters.lookups()} if filters is not None else {}
    for column, lookup, value in (filters.selections() if filters is not None else []):
        value = readable(column, value) if lookup == "exact" else value
        parts.append(f"{column_label(table, column)} {_(lookups.get(lookup, lookup))} {value}".strip())
    parts += [str(note) for note in (facet_notes or []) if note]
    if search_note:
        parts.append(str(search_note))
    if sort:
        parts.append(_("sorted by %(column)s, ascending", column=column_label(table, sort)))
    elif sort_desc:
        parts.append(_("sorted by %(column)s, descending", column=column_label(table, sort_desc)))
    return parts


def intro(database, table) -> markupsafe.Markup | None:
    """A type's table page: what it holds, and links to its chart, every column, the other types."""
    record_type = TYPES.get(table) if isinstance(table, str) else None
    if record_type is None:
        return None
    links = []
    if record_type.date_field:
        links.append(markupsafe.Markup('<a href="{}">{}</a>').format(DASHBOARD_PATH, _("Chart: per month")))
    links.append(markupsafe.Markup('<a href="/{}/{}?_bc_all=1">{}</a>').format(database, table, _("Show every column")))
    others = [markupsafe.Markup('<a href="/{}/{}">{}</a>').format(database, t, _(rt.title))
              for t, rt in TYPES.items() if t != table]
    if others:
        links.append(markupsafe.Markup("{}: {}").format(_("Other record types"), markupsafe.Markup(" · ").join(others)))
    text = _("One row per record; open one for its card. Search finds Korean, Japanese and English words of any length.")
    return markupsafe.Markup("{} {}").format(text, markupsafe.Markup(" · ").join(links))


def shown_by_name() -> tuple[str, ...]:
    """Words a page shows through `bc_t` as Datasette or browse.py writes them (an error page's
    message, the dashboard's title and axis), listed here so the catalogue's extraction
    (basecrawler/i18n/extract.py) keeps them."""
    return (_("Table not found"), _("Record not found"), _("Database not found"), _("Records per month"),
            _("Records per month per country, the last ten years with a known date."), _("month"))


# The chart's words as browse.py declares them (English): each part looked up in the catalogue.
_PER_MONTH = re.compile(r"^(?P<title>.+?) per month(?: per (?P<series>\w+))?$")


def title(text) -> str:
    """A declared title in the reader's language: as catalogued, else "<type> per month [per
    <series>]" from its parts (a chart of a record type added later needs no new entry)."""
    if not text:
        return ""
    text = str(text)
    if _(text) != text or i18n.language() == "en":
        return _(text)
    found = _PER_MONTH.match(text)
    if found is None:
        capital = text[:1].upper() + text[1:]       # an axis title: "vehicle recalls", "country"
        return _(capital) if _(capital) != capital else text
    kind = title(found["title"])
    if found["series"]:
        return _("%(title)s per month per %(series)s", title=kind, series=title(found["series"]))
    return _("%(title)s per month", title=kind)


def charts(declared: dict) -> list:
    """The dashboard's charts as [slug, chart] pairs, their titles and axis titles in the
    reader's language (the chart draws what it is given)."""
    out = []
    for slug, chart in sorted(declared.items()):
        chart = copy.deepcopy(chart)
        chart["title"] = title(chart.get("title"))
        for channel in (chart.get("display") or {}).get("encoding", {}).values():
            if isinstance(channel, dict) and channel.get("title"):
                channel["title"] = title(channel["title"])
        out.append([slug, chart])
    return out


def when(value) -> str:
    """A stored moment as "2024년 7월 1일 (3일 전)"."""
    day = i18n.date(value)
    ago = i18n.ago(value, dt.datetime.now(dt.timezone.utc))
    return f"{day} ({ago})" if day and ago else day


@hookimpl
def prepare_jinja2_environment(env, datasette):
    env.add_extension("jinja2.ext.i18n")
    env.install_gettext_callables(
        gettext=lambda message: i18n.gettext(message),
        ngettext=lambda singular, plural, n: i18n.translations(i18n.language()).ngettext(singular, plural, n),
        newstyle=True)
    env.globals.update({
        "bc_lang": i18n.language, "bc_t": i18n.gettext, "bc_lang_url": lang_url, "bc_num": i18n.number, "bc_date": i18n.date,
        "bc_when": when, "bc_column_label": column_label, "bc_column_labels": column_labels, "bc_count_line": count_line, "bc_crumb": crumb,
        "bc_facet_value": facet_value, "bc_description": description, "bc_intro": intro, "bc_title": title,
        "bc_charts": charts,
    })
