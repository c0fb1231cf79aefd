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

Datasette's metadata, read from the type declarations, is built in `webmeta`.
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
from basecrawler.store.engines.dialect import SQLITE
from basecrawler.errors import ConfigError
from basecrawler.reading.web.limits import SQL_THREADS
from basecrawler.reading.webmeta import (COMMON_COLUMN_DESCRIPTIONS, DASHBOARD_PATH, PLUGIN_NAME, best_text_column,
                                         build_metadata, chart_sql, column_descriptions, database_name,
                                         default_columns, http_url, types_by_table)

log = logging.getLogger(__name__)

INSTALL_HINT = "the web view needs Datasette: pip install 'basecrawler[web]'"

WEB_DIR = Path(__file__).parent / "web"
STATIC_MOUNT = "bc-static"   # URL prefix of web/static; not a name a database file would get


def datasette_available() -> bool:
    return importlib.util.find_spec("datasette") is not None


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
        conn.execute(SQLITE.write("PRAGMA journal_mode = DELETE"))
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


# The servers, and (for existing imports) what webmeta derives from the declarations.
__all__ = ["BrowseServer", "SnapshotServer", "build_metadata", "datasette_command", "datasette_available",
           "database_name", "default_columns", "http_url", "snapshot_to_sqlite", "types_by_table",
           "INSTALL_HINT", "DASHBOARD_PATH", "PLUGIN_NAME", "COMMON_COLUMN_DESCRIPTIONS", "best_text_column",
           "chart_sql", "column_descriptions"]
