"""What the web view derives from the record-type declarations: Datasette's metadata (per type
a table with its title, column descriptions, facets, default sort and columns; a per-month
query and chart), and the helpers the web plugins share (`types_by_table`, `http_url`, …).
Pure functions of the declarations and, for which tables exist, of the database file."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from basecrawler.recordtypes import RecordType, record_types
from basecrawler.store.engines.dialect import SQLITE

PLUGIN_NAME = "basecrawler_web"   # the plugin module's name: Datasette's key for its config

DASHBOARD = "records"
DASHBOARD_PATH = f"/-/dashboards/{DASHBOARD}"
CHART_MONTHS = 120   # the chart shows the last ten years that have a known date

# Columns every type's table has besides its model's (store bookkeeping), described once.
# "Header — explanation": the page's script shows the part before " — " as the column header.
COMMON_COLUMN_DESCRIPTIONS = {
    "id": "Id — row id, stable within this database; opens the record's card",
    "source": "Source — basecrawler source id that collected the record",
    "date_unknown": "Date unknown — 1 when the published date could not be read (the record has no date)",
    "source_lang": "Language — language of the *_original fields (en, ja, fr …)",
    "extra": "Extra — source-specific fields (JSON)",
    "first_seen_at": "First seen — when basecrawler first stored the record (UTC)",
    "updated_at": "Updated — when a crawl last changed the record (UTC)",
    "translated_at": "Translated — when the Korean fields were written (UTC); empty = waiting for translation",
    "translation_status": "Translation — translated, failed, … (empty while pending)",
    "translation_note": "Translation note — why a translation was held back or failed",
}


def database_name(db_path: str | Path) -> str:
    """The name Datasette gives a database file: its stem (`recalls.db` → `recalls`)."""
    return Path(db_path).stem


def http_url(value) -> str | None:
    """`value` when it is an http(s) URL a page may link to; None for anything else
    (`javascript:`, `data:`, relative paths): those are shown as text, never as a link."""
    if isinstance(value, str) and value.strip().lower().startswith(("http://", "https://")):
        stripped = value.strip()
        if not any(ch.isspace() or ord(ch) < 32 for ch in stripped):
            return stripped
    return None

# ---- what the web view derives from a declaration -------------------------------------------
def types_by_table() -> dict[str, RecordType]:
    return {record_type.table: record_type for record_type in record_types().values()}


def best_text_column(record_type: RecordType) -> str | None:
    """The column a table shows the record's best text in (the first display field's Korean
    column; the cell falls back along `display`, see the plugin)."""
    return f"{record_type.display[0]}_ko" if record_type.display else None


def default_columns(record_type: RecordType) -> tuple[str, ...]:
    """What a type's table shows first: its `listing`, the best text, its links. A listed
    original of the best text's first field is left out: the best-text cell shows it already
    (a product alert's title twice, once as Title and once as Text)."""
    best = best_text_column(record_type)
    shown_by_best = {f"{record_type.display[0]}_original"} if best else set()
    extra = [c for c in (best, *record_type.url_fields) if c]
    return tuple(dict.fromkeys((*(c for c in record_type.listing if c not in shown_by_best), *extra)))


def column_descriptions(record_type: RecordType) -> dict[str, str]:
    columns = [*record_type.data_columns, *record_type.korean_columns]
    described = {c: record_type.label(c) for c in columns if c in record_type.labels}
    best = best_text_column(record_type)
    if best:
        chain = ", else ".join(record_type.label(f"{b}_original").lower() for b in record_type.display)
        described[best] = f"Text — the record's best text: {chain}; Korean when translated, else the original"
    return {**COMMON_COLUMN_DESCRIPTIONS, **described}


def facet_config(record_type: RecordType) -> list:
    """Datasette facets for a type: the plugin's `values` facet per declared facet (a value
    that expands, as model-year ranges, or a multi-valued field counted under each value; its
    counts cached per run), the plugin's `month` facet over the date field."""
    facets: list = [{"values": f.field} for f in record_type.facets]
    if record_type.date_field:
        facets.append({"month": record_type.date_field})
    return facets


def chart_sql(record_type: RecordType) -> str:
    """Records per month per country over the last ten years with a known date, every month of
    that span present (0 where nothing was published) so the month axis is continuous."""
    table, date = record_type.table, record_type.date_field
    series = "country" if "country" in record_type.data_columns else "source"
    known = "COALESCE(date_unknown, 0) = 0" if record_type.date_optional else "1 = 1"
    return f"""\
WITH RECURSIVE dated AS (
  SELECT substr([{date}], 1, 7) AS month, [{series}] AS series FROM [{table}]
  WHERE {known} AND [{date}] IS NOT NULL AND [{date}] > '1970-01-01'
), span AS (
  SELECT max(month) AS last, (SELECT min(month) FROM dated) AS first FROM dated
), months(month) AS (
  SELECT max(first, strftime('%Y-%m', date(last || '-01', '-{CHART_MONTHS - 1} months'))) FROM span
  WHERE last IS NOT NULL
  UNION ALL
  SELECT strftime('%Y-%m', date(month || '-01', '+1 month')) FROM months, span WHERE month < last
), counted AS (
  SELECT month, series, count(*) AS n FROM dated WHERE month >= (SELECT min(month) FROM months) GROUP BY month, series
), everything AS (
  SELECT months.month, all_series.series FROM months, (SELECT DISTINCT series FROM counted) AS all_series
)
SELECT everything.month, everything.series AS {series}, COALESCE(counted.n, 0) AS records
FROM everything LEFT JOIN counted ON counted.month = everything.month AND counted.series = everything.series
ORDER BY everything.month, everything.series"""


def chart_query_name(record_type: RecordType) -> str:
    return f"{record_type.name}_per_month"


def _chart(record_type: RecordType, db: str) -> dict:
    series = "country" if "country" in record_type.data_columns else "source"
    return {
        "title": f"{record_type.title} per month per {series}", "db": db, "query": chart_sql(record_type),
        "library": "vega-lite",
        "display": {"mark": {"type": "bar", "tooltip": True},
                    "encoding": {"x": {"field": "month", "type": "ordinal", "title": "month"},
                                 "y": {"field": "records", "type": "quantitative", "title": record_type.title.lower()},
                                 "color": {"field": series, "type": "nominal", "title": series}}},
    }


def present_tables(db_path: str | Path) -> dict[str, int] | None:
    """{type table: rows} for the tables the database has; None when it cannot be read (then
    every declared type is configured)."""
    if not Path(db_path).is_file():
        return None
    try:
        with sqlite3.connect(f"file:{Path(db_path).resolve()}?mode=ro", uri=True) as conn:
            tables = SQLITE.query("SELECT name FROM sqlite_master WHERE type = 'table'")
            names = {row[0] for row in conn.execute(tables)}
            return {t: conn.execute(SQLITE.query(f"SELECT count(*) FROM [{t}]")).fetchone()[0]
                    for t in types_by_table() if t in names}
    except sqlite3.Error:
        return None


def home_table(tables: dict[str, RecordType], counts: dict[str, int] | None) -> str | None:
    """The table `/` opens on: the type with the most records (the first declared when empty)."""
    if not tables:
        return None
    return max(tables, key=lambda t: ((counts or {}).get(t, 0), -list(tables).index(t)))


def build_metadata(db_path: str | Path) -> dict:
    """Datasette metadata: per record type a table (title, column descriptions, facets, default
    sort, default columns), a canned per-month query and a chart; the other store tables."""
    name = database_name(db_path)
    counts = present_tables(db_path)
    tables = {t: rt for t, rt in types_by_table().items() if counts is None or t in counts}
    # A chart per type with a date and records (an empty type would draw an empty frame).
    charted = {t: rt for t, rt in tables.items() if rt.date_field and (counts is None or counts[t])}
    type_tables, queries = {}, {}
    for table, record_type in tables.items():
        others = " · ".join(f'<a href="/{name}/{t}">{rt.title}</a>' for t, rt in tables.items() if t != table)
        links = [f'<a href="{DASHBOARD_PATH}">Chart: per month</a>'] if table in charted else []
        links.append(f'<a href="/{name}/{table}?_bc_all=1">Show every column</a>')
        if others:
            links.append(f"Other record types: {others}")
        type_tables[table] = {
            "title": record_type.title,
            "description_html": ("One row per record; click its id for the record's card. Search finds Japanese, "
                                 "Korean and English words of any length. " + " · ".join(links)),
            "columns": column_descriptions(record_type),
            "facets": facet_config(record_type),
            **({"sort_desc": record_type.date_field} if record_type.date_field else {}),
            "label_column": record_type.key[-1],
            # No fts_table: the plugin answers ?_search= with the CLI's search, which also
            # matches terms too short for the trigram index.
        }
        if table in charted:
            queries[chart_query_name(record_type)] = {
                "title": f"{record_type.title} per month", "sql": chart_sql(record_type), "hide_sql": True,
                "description_html": (f"The last ten years of {record_type.title.lower()} with a known date, "
                                     f'every month (0 where none). <a href="{DASHBOARD_PATH}">Show as a chart</a>'),
            }
    home = home_table(tables, counts)
    return {
        "title": "basecrawler — public recall data",
        "description": "Public recall and safety data from government sources, with Korean translations. Read-only.",
        "plugins": {
            PLUGIN_NAME: {"home": f"/{name}/{home}" if home else None,
                          "default_columns": {t: list(default_columns(rt)) for t, rt in tables.items()}},
            "datasette-dashboards": {DASHBOARD: {
                "title": "Records per month",
                "description": "Records per month per country, the last ten years with a known date.",
                "layout": [[f"per-month-{rt.name}"] for rt in charted.values()],
                "charts": {f"per-month-{rt.name}": _chart(rt, name) for rt in charted.values()},
            }},
        },
        "databases": {
            name: {
                "tables": {
                    **type_tables,
                    "crawl_runs": {"title": "Crawl runs", "sort_desc": "id",
                                   "description": "One row per run of a source with its counts and status.",
                                   "facets": ["source", "status", "mode"]},
                    "dead_letters": {"title": "Dead letters", "sort_desc": "id",
                                     "description": "Items that could not be fetched, parsed or stored, with the raw input kept.",
                                     "facets": ["source", "stage", "kind"]},
                    "enrichment": {"title": "Enrichment queue", "facets": ["source", "state"],
                                   "description": "Detail-fetch state per recall of two-phase sources."},
                    "artifacts": {"title": "Downloaded documents", "facets": ["source", "state"]},
                    "responses": {"title": "Archived HTTP responses", "sort_desc": "id"},
                    "translation_memory": {"title": "Translation memory"},
                    "meta": {"title": "Store metadata (scheduler state and more)"},
                },
                "queries": queries,
            }
        },
    }
