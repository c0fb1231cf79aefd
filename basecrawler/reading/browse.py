"""A browsable, read-only web view of the store: Datasette on 127.0.0.1 with a table, a card,
facets and a chart per record type, all read from the type declarations (optional extra
`basecrawler[web]`).

Datasette runs as a subprocess (`python -m datasette serve`), so the crawler never imports it
and a crash of the web view cannot touch a crawl. The database is opened the way Datasette opens
mutable files, read-only (`mode=ro`), and not with `-i`: immutable mode tells SQLite to ignore
the write-ahead log, so rows a crawl committed but not yet checkpointed would be invisible (or
the file could look corrupt while the scheduler writes).

Datasette reads SQLite only. A PostgreSQL store is served from a read-only SQLite snapshot that
`browse` refreshes periodically (see `SnapshotServer`): the viewer never holds a connection or a
lock on the shared database, and a slow page cannot slow a crawl.

What makes it open on data lives in basecrawler/reading/web/ (see docs/ARCHITECTURE.md): Datasette
plugins (plugins/: search, default columns, the best-text cell, facets per declaration, the
Content-Security-Policy and formula-safe CSV), templates (a record's page as a card, the
dashboard without inline script) and a stylesheet and scripts (static/). The chart of records
per month per country is a dashboard of the maintained datasette-dashboards plugin (Vega-Lite
ships inside its wheel, so it draws offline) at /-/dashboards/records.
"""
from __future__ import annotations

import importlib.util
import json
import logging
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from basecrawler.store.engines import is_postgres_url, redact
from basecrawler.errors import ConfigError
from basecrawler.recordtypes import RecordType, record_types
from basecrawler.reading.web.limits import SQL_THREADS

log = logging.getLogger(__name__)

INSTALL_HINT = "the web view needs Datasette: pip install 'basecrawler[web]'"

WEB_DIR = Path(__file__).parent / "web"
STATIC_MOUNT = "bc-static"   # URL prefix of web/static; not a name a database file would get
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


def datasette_available() -> bool:
    return importlib.util.find_spec("datasette") is not None


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
            names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            return {t: conn.execute(f"SELECT count(*) FROM [{t}]").fetchone()[0]
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


def datasette_command(db_path: str | Path, metadata_path: str | Path, *, host: str = "127.0.0.1",
                      port: int = 8001) -> list[str]:
    return [sys.executable, "-m", "datasette", "serve", str(db_path), "--host", host, "--port", str(port),
            "--metadata", str(metadata_path), "--setting", "default_page_size", "50",
            "--plugins-dir", str(WEB_DIR / "plugins"), "--template-dir", str(WEB_DIR / "templates"),
            "--static", f"{STATIC_MOUNT}:{WEB_DIR / 'static'}",
            "--setting", "sql_time_limit_ms", "3000",
            # Suggestions count distinct values of every column on every table page (seconds
            # at a million records); the declared facets are the ones worth showing.
            "--setting", "suggest_facets", "off",
            # The CSV download is rewritten formula-safe in memory (plugins/basecrawler_guard.py):
            # a page of at most max_returned_rows, never an unbounded stream of the whole table.
            "--setting", "allow_csv_stream", "off",
            # Six values per facet (the "…" link shows more): thirty would push the table a
            # screen down on a real database with hundreds of makers and months.
            "--setting", "default_facet_size", "6",
            # Threads for the heavy requests' slots and for light pages besides (web/limits.py).
            "--setting", "num_sql_threads", str(SQL_THREADS)]


class BrowseServer:
    """Datasette for one SQLite database in a subprocess.

        with BrowseServer(db_path, port=8123) as server:
            server.url  # http://127.0.0.1:8123
    """

    def __init__(self, db_path: str | Path, *, host: str = "127.0.0.1", port: int = 8001,
                 allow_sql: bool = False):
        if not datasette_available():
            raise ConfigError(INSTALL_HINT)
        if not Path(db_path).exists():
            raise ConfigError(f"no database at {db_path}")
        self.db_path = Path(db_path)
        self.host, self.port = host, port
        self.process: subprocess.Popen | None = None
        self._metadata_dir: tempfile.TemporaryDirectory | None = None
        self._metadata: dict | None = None
        # Arbitrary SQL (?sql=, _where= …) only when the operator asks (`browse --allow-sql`).
        self.allow_sql = allow_sql

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def table_url(self) -> str:
        """Where the view opens: the home table (the record type with the most records)."""
        home = (self._metadata or build_metadata(self.db_path))["plugins"][PLUGIN_NAME]["home"]
        return self.url + (home or "/")

    def start(self, *, quiet: bool = False) -> "BrowseServer":
        self._metadata_dir = tempfile.TemporaryDirectory(prefix="basecrawler-browse-")
        metadata_path = Path(self._metadata_dir.name) / "metadata.json"
        self._metadata = build_metadata(self.db_path)
        self._metadata["plugins"]["basecrawler_guard"] = {"allow_sql": self.allow_sql}
        metadata_path.write_text(json.dumps(self._metadata, ensure_ascii=False, indent=2), "utf-8")
        output = subprocess.DEVNULL if quiet else None
        self.process = subprocess.Popen(datasette_command(self.db_path, metadata_path, host=self.host, port=self.port),
                                        stdout=output, stderr=output)
        return self

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        """Block until Datasette answers (or raise RuntimeError if it exited or timed out)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"datasette exited with code {self.process.returncode}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/versions.json", timeout=2):
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)
        raise RuntimeError(f"datasette did not answer on {self.url} within {timeout_s:.0f}s")

    def wait(self, timeout_s: float | None = None) -> int | None:
        """The exit code once Datasette exits; None when `timeout_s` passed first."""
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._metadata_dir is not None:
            self._metadata_dir.cleanup()
            self._metadata_dir = None

    def __enter__(self) -> "BrowseServer":
        self.start(quiet=True)
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# ---- PostgreSQL: serve a read-only SQLite snapshot -------------------------------------------
def snapshot_to_sqlite(url: str, path: str | Path) -> Path:
    """Copy the PostgreSQL store at `url` into a new SQLite file at `path` (replaced
    atomically: a reader never sees half a snapshot). The copy is `migrate`'s own, so every
    table of every type arrives and the counts are checked table by table."""
    path = Path(path)
    try:   # the engines' own snapshot (engines/transfer.py), where the store provides one
        from basecrawler.store.engines.transfer import snapshot_to_sqlite as engine_snapshot
    except ImportError:
        engine_snapshot = None
    if engine_snapshot is not None:
        engine_snapshot(url, path)
        return path
    partial = path.with_name(path.name + ".partial")
    for leftover in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm")):
        leftover.unlink(missing_ok=True)
    _copy_into_sqlite(url, partial)
    with sqlite3.connect(partial) as conn:   # one self-contained file: no -wal beside it
        conn.execute("PRAGMA journal_mode = DELETE")
    partial.replace(path)
    return path


def _copy_into_sqlite(url: str, path: Path) -> None:
    from basecrawler.store.engines.transfer import copy_store
    from basecrawler.store.core import Store

    source, target = Store(url), Store(path)
    try:
        counts = copy_store(source, target)
    finally:
        source.close()
        target.close()
    short = [table for table, (a, b) in counts.items() if a != b]
    if short:
        raise RuntimeError(f"snapshot of {redact(url)} incomplete: counts differ in {', '.join(short)}")


class SnapshotServer:
    """`browse` on PostgreSQL: Datasette over a SQLite snapshot in `folder`, remade every
    `refresh_s` seconds. A refresh builds the new file first and then restarts Datasette on
    it (about a second without answers), because Datasette keeps its SQLite connections open
    and would go on reading the replaced file."""

    def __init__(self, url: str, folder: str | Path, *, host: str = "127.0.0.1", port: int = 8001,
                 refresh_s: float = 600.0, allow_sql: bool = False):
        if not is_postgres_url(url):
            raise ConfigError(f"not a PostgreSQL URL: {redact(str(url))}")
        self.url_db, self.folder = url, Path(folder)
        self.host, self.port, self.refresh_s = host, port, refresh_s
        self.allow_sql = allow_sql
        # Named after the PostgreSQL database, so the view's URLs read /<database>/<table>.
        name = re.sub(r"[^A-Za-z0-9_-]", "_", urllib.parse.urlsplit(url).path.strip("/")) or "basecrawler"
        self.snapshot = self.folder / "browse-snapshot" / f"{name}.db"
        self.server: BrowseServer | None = None
        self.snapshot_at: float | None = None

    def refresh(self, *, quiet: bool = False) -> None:
        started = time.monotonic()
        self.snapshot.parent.mkdir(parents=True, exist_ok=True)
        snapshot_to_sqlite(self.url_db, self.snapshot)
        # The table pages' facet counts, counted once into the snapshot before it is served.
        from basecrawler.reading.facetcounts import keep_counts_in_snapshot
        keep_counts_in_snapshot(self.snapshot)
        self.snapshot_at = time.time()
        log.info("browse: snapshot of %s taken in %.1f s", redact(self.url_db), time.monotonic() - started)
        if self.server is not None:
            self.server.stop()
        self.server = BrowseServer(self.snapshot, host=self.host, port=self.port, allow_sql=self.allow_sql)
        self.server.start(quiet=quiet)
        self.server.wait_ready()

    def serve_forever(self, *, started: bool = False) -> int:
        """Serve, refreshing on schedule, until Datasette exits (its exit code)."""
        if not started:
            self.refresh()
        while True:
            code = self.server.wait(timeout_s=self.refresh_s)
            if code is not None:
                return code
            try:
                self.refresh()
            except Exception as exc:   # a failed refresh keeps serving the last snapshot
                log.warning("browse: snapshot refresh failed, still serving the one from %s: %s",
                            time.strftime("%H:%M:%S", time.localtime(self.snapshot_at)), exc)
                if self.server.process.poll() is not None:
                    self.server.start()
                    self.server.wait_ready()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


__all__ = ["BrowseServer", "SnapshotServer", "build_metadata", "datasette_command", "datasette_available",
           "database_name", "default_columns", "http_url", "snapshot_to_sqlite", "types_by_table",
           "INSTALL_HINT", "DASHBOARD_PATH"]
