"""The store: one connection (WAL, busy timeout, migrations and the tables of record types on
open), its lock retries and write transactions, and one small repository per table, each
holding its own SQL:

    store.records       records of any type: the upsert (records.py)
    store.lookup        records of any type: rows by key, counts, a row (lookup.py)
    store.runs          crawl_runs (runs.py)
    store.dead_letters  dead_letters (deadletters.py)
    store.ledger        list_ledger (ledger.py)
    store.enrichment    the enrichment queue (enrichment_queue.py)

Two engines, one contract: a path is a SQLite file (the default, no server); a
`postgresql://…` URL is a PostgreSQL database reached through psycopg 3 (engines/pg.py). Each
statement is spelled with the engine's dialect (`dialect_of(store)`, engines/dialect.py), so
every repository and every `store.write(…)` elsewhere runs on both. Callers ask the
repositories; the Store keeps only `upsert` (the pipeline's write) and the few calls modules
outside the store still make of it.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Iterable, Iterator

import sqlite_utils
from pydantic import BaseModel

from basecrawler.formats.dates import utc_now_iso
from basecrawler.store.engines import is_postgres_url, redact
from basecrawler.store.engines.dialect import SQLITE, dialect_of
from basecrawler.recordtypes import RecordType, record_types
from basecrawler.recordtypes.tables import pg_trgm_index_name, pg_windows_index_name
from basecrawler.store.dberrors import is_locked_error
from basecrawler.store.deadletters import DeadLetters, decode_raw, encode_raw
from basecrawler.store.enrichment_queue import EnrichmentQueue
from basecrawler.store.finishing import Finisher
from basecrawler.store.ledger import ListLedger
from basecrawler.store.lookup import Lookup, decode_row
from basecrawler.store.records import Records, UpsertResult
from basecrawler.store.runs import Runs, pid_alive
from basecrawler.store.schema import ensure_types, migrate

log = logging.getLogger(__name__)

LOCK_RETRIES = 5
LOCK_RETRY_BASE_WAIT_S = 0.2
BUSY_TIMEOUT_MS = 30_000
# The SQLite connection's page cache, in KiB (SQLite's default is 2,000). A batch touches leaf
# pages all over each secondary index (dates, makers, model years arrive in no order); with the
# default, the pages of one statement are evicted before the next needs them, and every batch
# reads them back and spills them again (bench/README.md, wave 21).
PAGE_CACHE_KIB = 16_384


class Store:
    """One SQLite database file (or `:memory:`), or a PostgreSQL database (`postgresql://…`).
    Thread-safe: one connection per Store, writes serialised."""

    def __init__(self, path: str | Path = "basecrawler.db"):
        self.path = str(path)
        self.engine = "postgresql" if is_postgres_url(self.path) else "sqlite"
        # Every use of the connection holds this lock (enrichment workers archive responses
        # through it from their threads); the repositories take it too.
        self.lock = threading.RLock()
        # A SQLite batch finishing behind the caller (finishing.py): one at a time, settled by
        # any other use of the connection (`db`).
        self.finisher = Finisher()
        self._reading: sqlite3.Connection | None = None   # lookups meanwhile (`reader`)
        self.records = Records(self)
        self.lookup = Lookup(self)
        self.runs = Runs(self)
        self.dead_letters = DeadLetters(self)
        self.ledger = ListLedger(self)
        self.enrichment = EnrichmentQueue(self)
        if self.engine == "postgresql":
            self._open_postgres()
            return
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # The file opened at start (the working directory may move since), None for :memory:.
        self.file = Path(self.path).resolve() if self.path != ":memory:" else None
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
        conn.execute(SQLITE.write(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}"))
        if self.path != ":memory:":
            self.with_lock_retry(lambda: conn.execute(SQLITE.write("PRAGMA journal_mode = WAL")))
        conn.execute(SQLITE.write("PRAGMA synchronous = NORMAL"))
        conn.execute(SQLITE.write(f"PRAGMA cache_size = -{PAGE_CACHE_KIB}"))
        conn.execute(SQLITE.write("PRAGMA foreign_keys = ON"))
        self._db = sqlite_utils.Database(conn)
        self.with_lock_retry(lambda: migrate(self.db))
        self.ensure_type_tables()

    def _open_postgres(self) -> None:
        try:
            from basecrawler.store.engines.pg import PgDatabase
        except ImportError as exc:   # psycopg is the optional extra "pg"
            from basecrawler.errors import ConfigError
            raise ConfigError(f"{redact(self.path)} needs psycopg 3: pip install 'basecrawler[pg]' ({exc})") from exc
        self.file = None
        self._db = PgDatabase(self.path)
        self.ensure_type_tables()   # migrate_pg: the numbered schema and every type's tables

    def ensure_type_tables(self) -> None:
        """Create or evolve the table of every known record type (a type module dropped in
        gets its table; a field added to a model, its column). Runs on open."""
        if self.engine == "postgresql":
            from basecrawler.store.engines.pg_migrations import migrate_pg   # psycopg: the optional extra "pg"
            self.with_lock_retry(lambda: migrate_pg(self.db.conn))
        else:
            self.with_lock_retry(lambda: ensure_types(self.db))
        self.records.fts_feeds.clear()

    @property
    def skip_locked(self) -> str:
        """The clause a claiming SELECT ends with: on PostgreSQL concurrent claimers skip each
        other's rows; on SQLite the write transaction already serialises them."""
        return " FOR UPDATE SKIP LOCKED" if self.engine == "postgresql" else ""

    def __repr__(self) -> str:
        return f"Store({redact(self.path)!r})"

    # ---- the connection ---------------------------------------------------------------
    @property
    def directory(self) -> Path:
        """Folder next to the database where the archive and artifacts live (for PostgreSQL,
        BASECRAWLER_DATA_DIR or the working directory: each machine keeps its own files)."""
        if self.engine == "postgresql":
            return Path(os.environ.get("BASECRAWLER_DATA_DIR") or Path.cwd()).resolve()
        if self.path == ":memory:":
            return Path.cwd()
        return Path(self.path).resolve().parent

    @property
    def db(self):
        """The database (sqlite-utils' `Database`, or engines/pg.py's adapter). Waits first for a
        batch finishing behind the caller, so nothing else ever runs on the connection meanwhile."""
        if self.finisher.busy:
            self.settle()
        return self._db

    def reader(self) -> sqlite3.Connection:
        """A second, read-only connection to the SQLite file, for lookups while a batch is
        finishing on the first (WAL: it reads what was committed). Never a new empty file."""
        if self._reading is None:
            self._reading = sqlite3.connect(f"{self.file.as_uri()}?mode=ro", uri=True, check_same_thread=False,
                                            timeout=BUSY_TIMEOUT_MS / 1000)
        return self._reading

    def settle(self) -> None:
        """Wait until the batch an `upsert(…, behind=True)` left finishing is committed; raise
        its failure (the batch was then rolled back whole)."""
        with self.lock:
            self.finisher.settle()

    def close(self) -> None:
        try:
            with self.lock:
                self.finisher.close()
        finally:
            if self._reading is not None:
                self._reading.close()
            self._db.conn.close()

    @staticmethod
    def with_lock_retry(operation):
        """Run `operation`, retrying up to 5 times with growing waits on `database is locked`."""
        for attempt in range(LOCK_RETRIES + 1):
            try:
                return operation()
            except Exception as exc:
                if not is_locked_error(exc) or attempt == LOCK_RETRIES:
                    raise
                wait = LOCK_RETRY_BASE_WAIT_S * (2 ** attempt)
                reason = "database is locked" if isinstance(exc, sqlite3.Error) else str(exc).split("\n")[0]
                log.warning("%s; retry %d/%d in %.1fs", reason, attempt + 1, LOCK_RETRIES, wait)
                time.sleep(wait)

    @contextlib.contextmanager
    def transaction(self, finish=None) -> Iterator[sqlite_utils.Database]:
        """BEGIN IMMEDIATE … COMMIT under the write lock (takes the SQLite write lock up front,
        so two writers queue on busy_timeout instead of failing half-way). `finish(conn)`, when
        given, ends the transaction in place of the COMMIT, still under the lock (a batch
        finishing behind: records.py)."""
        d = dialect_of(self)
        with self.lock:
            conn = self.db.conn
            conn.execute(d.write(d.begin))
            try:
                yield self.db
            except BaseException:
                if conn.in_transaction:
                    conn.execute(d.write("ROLLBACK"))
                raise
            else:
                if finish is None:
                    conn.execute(d.write("COMMIT"))
                else:
                    finish(conn)

    def write(self, operation):
        """Run `operation(db)` in one write transaction, retrying when the database is locked."""
        def attempt():
            with self.transaction() as db:
                return operation(db)
        return self.with_lock_retry(attempt)

    def scalar(self, sql: str, params: Iterable | dict = ()):
        """First column of the first row (None when no row), under the connection lock."""
        with self.lock:
            row = self.db.execute(sql, params).fetchone()
        return row[0] if row else None

    def write_returning(self, sql: str, params: Iterable | dict = ()) -> list[dict]:
        """One statement that writes and returns rows (`UPDATE … RETURNING`, a claim), atomic on
        its own and retried like `write` when the database is locked."""
        return self.with_lock_retry(lambda: self.query(sql, params))

    def query(self, sql: str, params: Iterable | dict = ()) -> list[dict]:
        # Threads share this one connection (enrichment workers archive responses through it):
        # a read stepping while another thread's transaction is open can break its COMMIT.
        with self.lock:
            return list(self.db.query(sql, params))

    # ---- meta: small facts kept by name (the scheduler's, the facet counts') -------------
    def set_meta(self, key: str, value: str) -> None:
        d = dialect_of(self)
        self.write(lambda db: db.conn.execute(d.write(
            f"INSERT INTO meta (key, value, updated_at) VALUES ({d.params(3)}) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at"),
            [key, value, utc_now_iso()],
        ))

    def get_meta(self, key: str) -> str | None:
        d = dialect_of(self)
        return self.scalar(d.query(f"SELECT value FROM meta WHERE key = {d.p}"), [key])

    # ---- PostgreSQL's facts for `doctor` -------------------------------------------------
    def server_facts(self) -> tuple[str, int | None, bool]:
        """PostgreSQL only: the server version, the schema version reached and whether the
        pg_trgm extension the search index needs is installed."""
        d = dialect_of(self)
        return (self.scalar(d.query("SHOW server_version")), self.scalar(d.query("SELECT MAX(version) FROM schema_version")),
                bool(self.scalar(d.query("SELECT COUNT(*) FROM pg_extension WHERE extname = 'pg_trgm'"))))

    def search_indexes(self) -> dict[str, str | None]:
        """PostgreSQL only: per table of a type with searched text, its search index —
        "windows" (terms of every length), "trgm" (3+ characters; a shorter term reads the
        table) or None."""
        found, d = {}, dialect_of(self)
        for record_type in record_types().values():
            if not record_type.text_index_columns:
                continue
            names = {pg_windows_index_name(record_type): "windows", pg_trgm_index_name(record_type): "trgm"}
            with self.lock:
                held = [names[name] for (name,) in self.db.conn.execute(d.query(
                    f"SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND indexname IN ({d.params(2)})"),
                    list(names)).fetchall()]
            found[record_type.table] = "windows" if "windows" in held else held[0] if held else None
        return found

    # ---- the write the pipeline uses, and what intake asks before it ---------------------
    def upsert(self, record_type: RecordType | str, records: Iterable[BaseModel], *, source: str,
               raws: list | None = None, input_hashes: list[str | None] | None = None,
               behind: bool = False, unstored: bool = False) -> UpsertResult:
        """`store.records.upsert`: the one write entry of the pipeline (pipeline/storing.py)."""
        return self.records.upsert(record_type, records, source=source, raws=raws, input_hashes=input_hashes,
                                   behind=behind, unstored=unstored)


__all__ = ["Store", "UpsertResult", "decode_row", "encode_raw", "decode_raw", "is_locked_error", "pid_alive"]
