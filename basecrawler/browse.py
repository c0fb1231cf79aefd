"""A browsable, read-only web view of the store: Datasette on 127.0.0.1 with titles, column
descriptions, facets and full-text search configured (optional extra `basecrawler[web]`).

Datasette runs as a subprocess (`python -m datasette serve`), so the crawler never imports it
and a crash of the web view cannot touch a crawl. The database is opened the way Datasette opens
mutable files, read-only (`mode=ro`), and not with `-i`: immutable mode tells SQLite to ignore
the write-ahead log, so rows a crawl committed but not yet checkpointed would be invisible (or
the file could look corrupt while the scheduler writes).

What makes it open on data lives in basecrawler/web/: a Datasette plugin (plugins/: search
that matches 1–2 character Japanese and Korean terms like the CLI, a default column set, the
Korean-with-original cell, a month facet), a template for a recall's page as a card
(templates/row.html) and a stylesheet and script (static/). The chart of recalls per month
per country is a dashboard of the maintained datasette-dashboards plugin (Vega-Lite ships inside
its wheel, so it draws offline) at /-/dashboards/recalls; the same numbers as a table are the
canned query `recalls_per_month`.
"""
from __future__ import annotations

import importlib.util
import json
import logging
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from .errors import ConfigError

log = logging.getLogger(__name__)

INSTALL_HINT = "the web view needs Datasette: pip install 'basecrawler[web]'"

WEB_DIR = Path(__file__).parent / "web"
STATIC_MOUNT = "bc-static"   # URL prefix of web/static; not a name a database file would get

# What /recalls shows first; every other column is a click away ("Show all columns").
DEFAULT_COLUMNS = ("country", "recall_number", "recall_date", "manufacturer_original", "model_original",
                   "summary_ko", "source_url")

CHART_QUERY = "recalls_per_month"
DASHBOARD = "recalls"
DASHBOARD_PATH = f"/-/dashboards/{DASHBOARD}"
CHART_SQL = """\
SELECT substr(recall_date, 1, 7) AS month, country, count(*) AS recalls
FROM recalls
WHERE COALESCE(date_unknown, 0) = 0
  AND recall_date >= date((SELECT max(recall_date) FROM recalls WHERE COALESCE(date_unknown, 0) = 0),
                          'start of month', '-119 months')
GROUP BY month, country
ORDER BY month, country"""

RECALL_COLUMN_DESCRIPTIONS = {
    "id": "row id (stable within this database)",
    "source": "basecrawler source id that collected the record",
    "country": "country or region of the publishing authority (US, CA, JP, AU, EU)",
    "recall_number": "the authority's own recall id; unique together with country",
    "recall_date": "recall date (1970-01-01 when the source's date could not be read, see date_unknown)",
    "date_unknown": "1 when the published date could not be parsed",
    "manufacturer_original": "manufacturer, as published", "manufacturer_ko": "manufacturer, Korean translation",
    "manufacturer_key": "manufacturer normalised by basecrawler/manufacturers.py (Ford Motor Company → FORD)",
    "model_original": "model(s), as published", "model_ko": "model(s), Korean translation",
    "component_original": "affected component or system, as published", "component_ko": "component, Korean translation",
    "summary_original": "summary of the defect, as published", "summary_ko": "summary, Korean translation",
    "defect_cause_original": "cause of the defect, as published", "defect_cause_ko": "cause, Korean translation",
    "consequence_original": "possible consequence, as published", "consequence_ko": "consequence, Korean translation",
    "remedy_original": "remedy offered, as published", "remedy_ko": "remedy, Korean translation",
    "model_year": "model year or range, e.g. 2021 or 2019-2021",
    "affected_units": "number of vehicles affected",
    "source_lang": "language of the *_original fields (en, ja, fr …)",
    "source_url": "page or document a person can open",
    "extra": "source-specific fields (JSON)",
    "first_seen_at": "when basecrawler first stored the record (UTC)",
    "updated_at": "when a crawl last changed the record (UTC)",
    "translated_at": "when the Korean fields were written (UTC); empty = waiting for translation",
    "translation_status": "translated, failed, … (empty while pending)",
    "translation_note": "why a translation was held back or failed",
}


def datasette_available() -> bool:
    return importlib.util.find_spec("datasette") is not None


def database_name(db_path: str | Path) -> str:
    """The name Datasette gives a database file: its stem (`recalls.db` → `recalls`)."""
    return Path(db_path).stem


def build_metadata(db_path: str | Path) -> dict:
    """Datasette metadata: titles, descriptions, facets and canned queries per table."""
    name = database_name(db_path)
    return {
        "title": "basecrawler — vehicle recalls",
        "description": "Public vehicle recall data from government sources, with Korean translations. Read-only.",
        "plugins": {"datasette-dashboards": {DASHBOARD: {
            "title": "Vehicle recalls",
            "description": "Recalls per month per country, the last ten years with a known recall date.",
            "layout": [["per-month"]],
            "charts": {"per-month": {
                "title": "Recalls per month per country", "db": name, "query": CHART_SQL, "library": "vega-lite",
                "display": {"mark": {"type": "bar", "tooltip": True},
                            "encoding": {"x": {"field": "month", "type": "ordinal", "title": "month"},
                                         "y": {"field": "recalls", "type": "quantitative", "title": "recalls"},
                                         "color": {"field": "country", "type": "nominal", "title": "country"}}},
            }},
        }}},
        "databases": {
            name: {
                "tables": {
                    "recalls": {
                        "title": "Vehicle recalls",
                        "description_html": (
                            "One row per recall; click its id for the recall's page. Search finds Japanese, "
                            "Korean and English words of any length. "
                            f'<a href="{DASHBOARD_PATH}">Chart: recalls per month per country</a> · '
                            f'<a href="/{name}/recalls?_bc_all=1">Show every column</a>'),
                        "columns": RECALL_COLUMN_DESCRIPTIONS,
                        "facets": ["country", "source", "manufacturer_key", "model_year", {"month": "recall_date"}],
                        "sort_desc": "recall_date",
                        "label_column": "recall_number",
                        # No fts_table: the plugin answers ?_search= with the CLI's search, which
                        # also matches terms too short for the trigram index.
                    },
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
                "queries": {
                    CHART_QUERY: {
                        "title": "Recalls per month per country",
                        "description_html": ("The last ten years of recalls with a known date. "
                                             f'<a href="{DASHBOARD_PATH}">Show as a chart</a>'),
                        "sql": CHART_SQL,
                        "hide_sql": True,
                    },
                },
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
            # Six values per facet (the "…" link shows more): thirty would push the table a
            # screen down on a real database with hundreds of makers and months.
            "--setting", "default_facet_size", "6"]


class BrowseServer:
    """Datasette for one database in a subprocess.

        with BrowseServer(db_path, port=8123) as server:
            server.url  # http://127.0.0.1:8123
    """

    def __init__(self, db_path: str | Path, *, host: str = "127.0.0.1", port: int = 8001):
        if not datasette_available():
            raise ConfigError(INSTALL_HINT)
        if not Path(db_path).exists():
            raise ConfigError(f"no database at {db_path}")
        self.db_path = Path(db_path)
        self.host, self.port = host, port
        self.process: subprocess.Popen | None = None
        self._metadata_dir: tempfile.TemporaryDirectory | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def table_url(self) -> str:
        return f"{self.url}/{database_name(self.db_path)}/recalls"

    def start(self, *, quiet: bool = False) -> "BrowseServer":
        self._metadata_dir = tempfile.TemporaryDirectory(prefix="basecrawler-browse-")
        metadata_path = Path(self._metadata_dir.name) / "metadata.json"
        metadata_path.write_text(json.dumps(build_metadata(self.db_path), ensure_ascii=False, indent=2), "utf-8")
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

    def wait(self) -> int:
        return self.process.wait()

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


__all__ = ["BrowseServer", "build_metadata", "datasette_command", "datasette_available", "database_name",
           "INSTALL_HINT", "DEFAULT_COLUMNS", "CHART_QUERY", "DASHBOARD_PATH"]
