"""The store: opening (WAL, busy timeout, migrations), the COALESCE upsert, run records, dead
letters. The only module that writes recalls.

Two engines, one contract: a path is a SQLite file (the default, no server); a
`postgresql://…` URL is a PostgreSQL database reached through psycopg 3 (engines/pg.py), whose
adapter takes the same SQL, so every method here and every `store.write(…)` elsewhere runs on
both.

Upsert rules (see docs/ARCHITECTURE.md, "The store"):
- a NULL or blank never erases a stored value (COALESCE, in SQL);
- a row whose merged values equal the stored ones is not written, so `updated_at` does not
  move and a re-run over the same data writes nothing;
- a changed `X_original` clears `X_ko` and `translated_at` so the row is translated again;
- a failing batch is bisected down to the rows that break it; only those become dead letters;
- new rows reach the full-text index with one statement per batch (`_FEED_FTS_SQL`): a per-row
  insert trigger cost about three times as much (bench/README.md). Updates and deletes, from
  here or any other writer, still go through the triggers of schema.py.
"""
from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import sqlite_utils

from .dates import EARLIEST_PLAUSIBLE_DATE, latest_plausible_date, utc_now_iso
from .engines import is_postgres_url, redact
from .manufacturers import manufacturer_key
from .model import KOREAN_COLUMNS, ORIGINAL_COLUMNS, TEXT_FIELDS, Recall
from .schema import FTS_COLUMNS, FTS_INSERT_TRIGGER, migrate

log = logging.getLogger(__name__)

LOCK_RETRIES = 5
LOCK_RETRY_BASE_WAIT_S = 0.2
BUSY_TIMEOUT_MS = 30_000

# Columns a crawl writes; the `_ko` columns and translation state belong to the translator.
DATA_COLUMNS = (
    "source", "country", "recall_number", "recall_date", "date_unknown",
    *ORIGINAL_COLUMNS,
    "model_year", "affected_units", "source_lang", "source_url", "extra",
)
_COMPARED_COLUMNS = tuple(c for c in DATA_COLUMNS if c not in ("country", "recall_number"))


@dataclass
class UpsertResult:
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    failed: list[tuple[dict, str]] = field(default_factory=list)  # (row, error)
    merged: int = 0   # rows folded into another row of the same key in this batch
    by_key: dict[tuple[str, str], str] = field(default_factory=dict)  # key → new / updated / unchanged

    @property
    def saved(self) -> int:
        return self.new + self.updated + self.unchanged

    def add(self, other: "UpsertResult") -> None:
        self.new += other.new
        self.updated += other.updated
        self.unchanged += other.unchanged
        self.failed.extend(other.failed)
        self.merged += other.merged
        self.by_key.update(other.by_key)


def is_locked_error(exc: BaseException) -> bool:
    """SQLite's `database is locked`, or PostgreSQL's deadlock / serialisation failure: the
    whole transaction may simply run again."""
    if isinstance(exc, sqlite3.OperationalError):
        return "database is locked" in str(exc) or "database is busy" in str(exc)
    if isinstance(exc, _db_errors()[1:]):   # psycopg's errors, and a lost connection (engines/pg.py)
        from .engines.pg import is_retryable
        return is_retryable(exc)
    return False


def _db_errors() -> tuple[type[BaseException], ...]:
    """Errors by which a database refuses a row, whatever the engine."""
    try:
        import psycopg
    except ImportError:
        return (sqlite3.Error,)
    return (sqlite3.Error, psycopg.Error)


def encode_raw(raw: Any) -> tuple[str, str | None, bytes | None]:
    """A raw item as (kind, text, bytes) for the dead_letters table."""
    if raw is None:
        return "none", None, None
    if isinstance(raw, (bytes, bytearray, memoryview)):
        return "bytes", None, bytes(raw)
    if isinstance(raw, str):
        return "text", raw, None
    return "json", json.dumps(raw, ensure_ascii=False, default=_json_default), None


def decode_raw(kind: str, text: str | None, blob: bytes | None) -> Any:
    if kind.endswith(_UTF8_SUFFIX):   # text kept as bytes (it held NUL; see add_dead_letter)
        kind, text, blob = kind[:-len(_UTF8_SUFFIX)], bytes(blob).decode("utf-8"), None
    if kind == "bytes":
        return blob
    if kind == "json":
        return json.loads(text) if text is not None else None
    return text


_UTF8_SUFFIX = "_utf8"


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return {"__bytes_b64__": base64.b64encode(bytes(value)).decode("ascii")}
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


class Store:
    """One SQLite database file (or `:memory:`), or a PostgreSQL database (`postgresql://…`).
    Thread-safe: one connection per Store, writes serialised."""

    def __init__(self, path: str | Path = "basecrawler.db"):
        self.path = str(path)
        self.engine = "postgresql" if is_postgres_url(self.path) else "sqlite"
        self._write_lock = threading.RLock()
        self._refused = _db_errors()
        if self.engine == "postgresql":
            self._open_postgres()
            return
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if self.path != ":memory:":
            self._with_lock_retry(lambda: conn.execute("PRAGMA journal_mode = WAL"))
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        self.db = sqlite_utils.Database(conn)
        self._with_lock_retry(lambda: migrate(self.db))
        # A database still carrying the per-row insert trigger (a schema from before it was
        # dropped) is fed by it; feeding it here as well would index new rows twice.
        self._feed_fts_per_batch = not conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?", [FTS_INSERT_TRIGGER]).fetchone()

    def _open_postgres(self) -> None:
        try:
            from .engines.pg import PgDatabase
            from .engines.pg_migrations import migrate_pg
        except ImportError as exc:   # psycopg is the optional extra "pg"
            from .errors import ConfigError
            raise ConfigError(f"{redact(self.path)} needs psycopg 3: pip install 'basecrawler[pg]' ({exc})") from exc
        self.db = PgDatabase(self.path)
        self._with_lock_retry(lambda: migrate_pg(self.db.conn))
        # PostgreSQL searches through a pg_trgm index on the columns themselves: nothing to feed.
        self._feed_fts_per_batch = False

    @property
    def skip_locked(self) -> str:
        """The clause a claiming SELECT ends with: on PostgreSQL concurrent claimers skip each
        other's rows; on SQLite the write transaction already serialises them."""
        return " FOR UPDATE SKIP LOCKED" if self.engine == "postgresql" else ""

    def __repr__(self) -> str:
        return f"Store({redact(self.path)!r})"

    # ---- plumbing ---------------------------------------------------------------------
    @property
    def directory(self) -> Path:
        """Folder next to the database where the archive and artifacts live (for PostgreSQL,
        BASECRAWLER_DATA_DIR or the working directory: each machine keeps its own files)."""
        if self.engine == "postgresql":
            return Path(os.environ.get("BASECRAWLER_DATA_DIR") or Path.cwd()).resolve()
        if self.path == ":memory:":
            return Path.cwd()
        return Path(self.path).resolve().parent

    def close(self) -> None:
        self.db.conn.close()

    @staticmethod
    def _with_lock_retry(operation):
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
    def transaction(self) -> Iterator[sqlite_utils.Database]:
        """BEGIN IMMEDIATE … COMMIT under the write lock (takes the SQLite write lock up front,
        so two writers queue on busy_timeout instead of failing half-way)."""
        with self._write_lock:
            conn = self.db.conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")

    def write(self, operation):
        """Run `operation(db)` in one write transaction, retrying when the database is locked."""
        def attempt():
            with self.transaction() as db:
                return operation(db)
        return self._with_lock_retry(attempt)

    def scalar(self, sql: str, params: Iterable | dict = ()):
        """First column of the first row (None when no row), under the connection lock."""
        with self._write_lock:
            row = self.db.execute(sql, params).fetchone()
        return row[0] if row else None

    def write_returning(self, sql: str, params: Iterable | dict = ()) -> list[dict]:
        """One statement that writes and returns rows (`UPDATE … RETURNING`, a claim), atomic on
        its own and retried like `write` when the database is locked."""
        return self._with_lock_retry(lambda: self.query(sql, params))

    def query(self, sql: str, params: Iterable | dict = ()) -> list[dict]:
        # Threads share this one connection (enrichment workers archive responses through it):
        # a read stepping while another thread's transaction is open can break its COMMIT.
        with self._write_lock:
            return list(self.db.query(sql, params))

    # ---- recalls ----------------------------------------------------------------------
    def upsert_recalls(self, records: Iterable[Recall], *, source: str, raws: list | None = None) -> UpsertResult:
        """Store one batch with the COALESCE rule; exact new / updated / unchanged counts.

        `raws` (same order as `records`) is what a failing row's dead letter keeps.
        """
        rows = []
        for index, record in enumerate(records):
            row = record.to_row()
            row["source"] = source
            row["_raw"] = raws[index] if raws is not None else row
            rows.append(row)
        folded = _fold_same_key(rows)
        result = self.write(lambda db: self._upsert_batch(db, folded))
        result.merged += len(rows) - len(folded)
        return result

    def _upsert_batch(self, db, rows: list[dict]) -> UpsertResult:
        result = UpsertResult()
        stored = self.rows_by_key(((r["country"], r["recall_number"]) for r in rows), DATA_COLUMNS)
        now = utc_now_iso()
        # Every row this batch inserts gets an id above today's largest (INTEGER PRIMARY KEY
        # without AUTOINCREMENT takes max + 1), so `id > last_id` is exactly the new rows.
        last_id = (db.conn.execute("SELECT COALESCE(MAX(id), 0) FROM recalls").fetchone()[0]
                   if self._feed_fts_per_batch else None)   # only the SQLite index feed needs it
        to_write: list[tuple[dict, str]] = []
        if self.engine == "postgresql":
            # Concurrent writers lock rows in one order (by key), so they queue, never deadlock.
            rows = sorted(rows, key=lambda r: (r["country"], r["recall_number"]))
        for row in rows:
            old = stored.get((row["country"], row["recall_number"]))
            if old is None:
                to_write.append((row, "new"))
                continue
            merged = _merge(old, row)
            if _column_values(merged) == _column_values(old):
                result.unchanged += 1
                result.by_key[(row["country"], row["recall_number"])] = "unchanged"
            else:
                to_write.append((merged | {"_raw": row["_raw"]}, "updated"))
        for row, outcome in self._write_bisecting(db, to_write, now):
            if outcome in ("new", "updated"):
                setattr(result, outcome, getattr(result, outcome) + 1)
                result.by_key[(row["country"], row["recall_number"])] = outcome
            else:
                result.failed.append((row, outcome))
        if result.new and self._feed_fts_per_batch:
            db.conn.execute(_FEED_FTS_SQL, [last_id])
        return result

    def rows_by_key(self, keys: Iterable[tuple[str, str]], columns: Iterable[str] | None = None) -> dict[tuple[str, str], dict]:
        """Stored rows for (country, recall_number) keys, in chunks of 500 per query."""
        cols = "*" if columns is None else ", ".join(f"[{c}]" for c in columns)
        by_country: dict[str, list[str]] = {}
        for country, number in keys:
            by_country.setdefault(country, []).append(number)
        found: dict[tuple[str, str], dict] = {}
        with self._write_lock:
            for country, numbers in by_country.items():
                for start in range(0, len(numbers), 500):
                    chunk = numbers[start:start + 500]
                    if self.engine == "postgresql":
                        # One array parameter instead of 500: PostgreSQL then plans the query
                        # once instead of per batch (a third of the upsert's time otherwise).
                        where, params = "recall_number = ANY(?)", [country, chunk]
                    else:
                        where, params = f"recall_number IN ({','.join('?' * len(chunk))})", [country, *chunk]
                    cursor = self.db.conn.execute(f"SELECT {cols} FROM recalls WHERE country = ? AND {where}", params)
                    names = [d[0] for d in cursor.description]
                    for values in cursor:
                        row = dict(zip(names, values))
                        found[(row["country"], row["recall_number"])] = row
        return found

    def _write_bisecting(self, db, items: list[tuple[dict, str]], now: str):
        """Write items inside a savepoint; on failure split in halves until the bad rows are
        alone. Yields (row, outcome) with outcome 'new' / 'updated' or the error text."""
        if not items:
            return
        savepoint = "upsert_batch"
        db.conn.execute(f"SAVEPOINT {savepoint}")
        try:
            db.conn.executemany(_UPSERT_SQL, [_sql_params(row, now) for row, _ in items])
        except (*self._refused, TypeError, ValueError, OverflowError) as exc:  # a refused or unbindable row
            db.conn.execute(f"ROLLBACK TO SAVEPOINT {savepoint}")
            db.conn.execute(f"RELEASE SAVEPOINT {savepoint}")
            if is_locked_error(exc):
                raise
            if len(items) == 1:
                yield items[0][0], f"{type(exc).__name__}: {exc}"
                return
            middle = len(items) // 2
            yield from self._write_bisecting(db, items[:middle], now)
            yield from self._write_bisecting(db, items[middle:], now)
            return
        db.conn.execute(f"RELEASE SAVEPOINT {savepoint}")
        yield from items

    def server_facts(self) -> tuple[str, int | None, bool]:
        """PostgreSQL only (for `doctor`): the server version, the schema version reached and
        whether the pg_trgm extension the search index needs is installed."""
        return (self.scalar("SHOW server_version"), self.scalar("SELECT MAX(version) FROM schema_version"),
                bool(self.scalar("SELECT COUNT(*) FROM pg_extension WHERE extname = 'pg_trgm'")))

    def newest_recall_date(self, source: str, today) -> str | None:
        """Newest plausible recall date of a source (the incremental watermark): a date outside
        `dates.is_plausible_date` (a 9999-12-31 stored before dates were checked) does not count."""
        return self.scalar(
            "SELECT MAX(recall_date) FROM recalls WHERE source = ? AND date_unknown = 0 "
            "AND recall_date >= ? AND recall_date <= ?",
            [source, EARLIEST_PLAUSIBLE_DATE.isoformat(), latest_plausible_date(today).isoformat()])

    def count_recalls(self, source: str | None = None) -> int:
        if source is None:
            return self.scalar("SELECT COUNT(*) FROM recalls")
        return self.scalar("SELECT COUNT(*) FROM recalls WHERE source = ?", [source])

    def get_recall(self, country: str, recall_number: str) -> dict | None:
        rows = self.query(
            "SELECT * FROM recalls WHERE country = ? AND recall_number = ?", [country.upper(), recall_number]
        )
        if not rows:
            return None
        row = rows[0]
        row["extra"] = json.loads(row["extra"]) if row.get("extra") else {}
        return row

    def known_recall_numbers(self, country: str, numbers: Iterable[str]) -> set[str]:
        """Which of these recall numbers of a country are stored already."""
        # The keyed lookup of the upsert: chunked (SQLite's variable limit) and one array on PostgreSQL.
        country = country.upper()
        return {number for _, number in self.rows_by_key(((country, n) for n in numbers), ["country", "recall_number"])}

    # ---- runs -------------------------------------------------------------------------
    def start_run(self, source: str, mode: str, status: str, pid: int, since=None, until=None) -> int:
        def op(db):
            # RETURNING rather than lastrowid: the one spelling both engines answer.
            return db.conn.execute(
                "INSERT INTO crawl_runs (source, mode, status, pid, started_at, since, until) VALUES (?,?,?,?,?,?,?) "
                "RETURNING id", [source, mode, status, pid, utc_now_iso(), since, until],
            ).fetchone()[0]
        return self.write(op)

    def update_run(self, run_id: int, **fields: Any) -> None:
        if not fields:
            return
        fields = {k: (json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v) for k, v in fields.items()}
        assignments = ", ".join(f"[{k}] = ?" for k in fields)
        self.write(lambda db: db.conn.execute(f"UPDATE crawl_runs SET {assignments} WHERE id = ?", [*fields.values(), run_id]))

    def close_dead_runs(self, *, exclude_run_id: int | None = None, lock_held: bool = False) -> list[int]:
        """Mark `running` / `waiting` rows whose process is gone as `crashed` (kill -9, power
        loss: the process never wrote its end). Returns their ids.

        A row is dead when its pid no longer exists; a `running` row is also dead when the
        caller holds the run lock (`lock_held`) and the row is not this process's: the lock
        is an flock the kernel releases when its holder dies, so nobody else can be running,
        whatever process now carries a reused pid.

        On PostgreSQL crawls run on several machines under per-source advisory locks: a pid is
        alive while a connection named for it exists (pg_stat_activity), and a held lock speaks
        for its own source only."""
        rows = self.query("SELECT id, pid, status, source FROM crawl_runs WHERE status IN ('running', 'waiting')")
        own = next((row["source"] for row in rows if row["id"] == exclude_run_id), None)
        alive = self._process_alive

        def lock_says_dead(row) -> bool:
            if not lock_held or row["status"] != "running" or row["pid"] == os.getpid():
                return False
            return self.engine == "sqlite" or row["source"] == own
        dead = [row["id"] for row in rows if row["id"] != exclude_run_id and (
            not alive(row["pid"]) or lock_says_dead(row))]
        if dead:
            now = utc_now_iso()
            marks = ",".join("?" * len(dead))
            self.write(lambda db: db.conn.execute(
                f"UPDATE crawl_runs SET status = 'crashed', finished_at = COALESCE(finished_at, ?), "
                f"error = COALESCE(error, 'the process ended without closing its run (killed or crashed)') "
                f"WHERE id IN ({marks}) AND status IN ('running', 'waiting')", [now, *dead]))
        return dead

    def _process_alive(self, pid: int | None) -> bool:
        if self.engine == "sqlite":
            return pid_alive(pid)
        if pid == os.getpid():
            return True
        from .engines.pg import APPLICATION_PREFIX
        return bool(self.scalar("SELECT COUNT(*) FROM pg_stat_activity WHERE application_name LIKE ?",
                                [f"{APPLICATION_PREFIX} % {int(pid or 0)}"]))

    def session(self) -> str:
        """A token for whoever writes through this store, whose liveness any other process can
        check with `session_alive`: this process's pid (SQLite, one machine), or the server
        process of this connection (PostgreSQL, any machine)."""
        if self.engine == "sqlite":
            return str(os.getpid())
        return f"pg{self.scalar('SELECT pg_backend_pid()')}"

    def session_alive(self, token: str) -> bool:
        if token.startswith("pg"):
            if self.engine != "postgresql" or not token[2:].isdigit():
                return False
            return bool(self.scalar("SELECT COUNT(*) FROM pg_stat_activity WHERE pid = ?", [int(token[2:])]))
        return token.isdigit() and pid_alive(int(token))

    def last_run(self, source: str) -> dict | None:
        rows = self.query("SELECT * FROM crawl_runs WHERE source = ? ORDER BY id DESC LIMIT 1", [source])
        return rows[0] if rows else None

    # ---- dead letters -----------------------------------------------------------------
    def add_dead_letter(self, *, source: str, run_id: int | None, stage: str, kind: str, error: str,
                        raw: Any, recall_number: str | None = None, url: str | None = None,
                        response_sha256: str | None = None) -> int:
        raw_kind, raw_text, raw_bytes = encode_raw(raw)
        if self.engine == "postgresql":
            # PostgreSQL text cannot hold NUL (SQLite can): such a raw item is kept as its UTF-8
            # bytes under `<kind>_utf8`, which decode_raw turns back into the same text.
            if raw_text is not None and "\x00" in raw_text:
                raw_kind, raw_text, raw_bytes = raw_kind + _UTF8_SUFFIX, None, raw_text.encode("utf-8")
            error = error.replace("\x00", "\\x00")

        def op(db):
            return db.conn.execute(
                "INSERT INTO dead_letters (source, run_id, stage, kind, error, recall_number, url, "
                "response_sha256, raw_kind, raw, raw_bytes, created_at, retry_count) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,0) RETURNING id",
                [source, run_id, stage, kind, error[:4000], recall_number, url, response_sha256,
                 raw_kind, raw_text, raw_bytes, utc_now_iso()],
            ).fetchone()[0]
        return self.write(op)

    def open_dead_letters(self, source: str | None = None) -> list[dict]:
        sql = "SELECT * FROM dead_letters WHERE resolved_at IS NULL"
        params: list = []
        if source:
            sql += " AND source = ?"
            params.append(source)
        return self.query(sql + " ORDER BY id", params)

    def dead_letter_retried(self, letter_id: int, *, error: str | None, at: str) -> None:
        """One `dead-letters retry` of a letter: resolved when `error` is None, else its new error."""
        if error is None:
            sql, params = ("UPDATE dead_letters SET resolved_at = ?, retried_at = ?, retry_count = retry_count + 1 "
                           "WHERE id = ?"), [at, at, letter_id]
        else:
            sql, params = ("UPDATE dead_letters SET error = ?, retried_at = ?, retry_count = retry_count + 1 "
                           "WHERE id = ?"), [error[:4000], at, letter_id]
        self.write(lambda db: db.conn.execute(sql, params))

    def list_dead_letters(self, source: str | None = None, *, include_resolved: bool = False,
                          limit: int = 100) -> list[dict]:
        """Newest first, with a preview of the raw input instead of all of it (`dead-letters list`)."""
        sql = ("SELECT id, source, run_id, stage, kind, error, recall_number, url, response_sha256, raw_kind, "
               "substr(raw, 1, 300) AS raw_preview, length(raw_bytes) AS raw_bytes_size, created_at, retried_at, "
               "resolved_at, retry_count FROM dead_letters WHERE 1=1")
        params: list = []
        if not include_resolved:
            sql += " AND resolved_at IS NULL"
        if source:
            sql += " AND source = ?"
            params.append(source)
        return self.query(sql + " ORDER BY id DESC LIMIT ?", [*params, limit])

    def sources_with_open_dead_letters(self) -> list[str]:
        rows = self.query("SELECT DISTINCT source FROM dead_letters WHERE resolved_at IS NULL")
        return sorted(row["source"] for row in rows)

    def count_open_dead_letters(self, source: str | None = None) -> int:
        if source is None:
            return self.scalar("SELECT COUNT(*) FROM dead_letters WHERE resolved_at IS NULL")
        return self.scalar("SELECT COUNT(*) FROM dead_letters WHERE source = ? AND resolved_at IS NULL", [source])

    # ---- what `status` shows ------------------------------------------------------------
    def sources_with_runs(self) -> set[str]:
        return {row["source"] for row in self.query("SELECT DISTINCT source FROM crawl_runs")}

    def last_successful_run(self, source: str) -> dict | None:
        rows = self.query("SELECT started_at, finished_at FROM crawl_runs WHERE source = ? AND status = 'succeeded' "
                          "ORDER BY id DESC LIMIT 1", [source])
        return rows[0] if rows else None

    def run_problem_counts(self, source: str) -> dict[str, int]:
        """Runs of the source that crashed or were interrupted, by status."""
        return {row["status"]: row["n"] for row in self.query(
            "SELECT status, COUNT(*) AS n FROM crawl_runs WHERE source = ? AND status IN ('crashed', 'interrupted') "
            "GROUP BY status", [source])}

    def enrichment_counts(self, source: str) -> dict[str, int]:
        """Enrichment items by state, `retry` per level (retry1 … retry4: how close to `gone`)."""
        return {row["state"]: row["n"] for row in self.query(
            "SELECT CASE WHEN state = 'retry' THEN 'retry' || level ELSE state END AS state, COUNT(*) AS n "
            "FROM enrichment WHERE source = ? GROUP BY 1 ORDER BY 1", [source])}

    def translation_counts(self, source: str) -> dict[str, int]:
        """Recalls by translation state: pending, translated, or the status the worker set."""
        return {(row["s"] or "pending"): row["n"] for row in self.query(
            "SELECT CASE WHEN translated_at IS NULL THEN 'pending' ELSE COALESCE(translation_status, 'translated') END AS s, "
            "COUNT(*) AS n FROM recalls WHERE source = ? GROUP BY s ORDER BY s", [source])}

    def translation_backlog(self) -> int:
        return self.scalar("SELECT COUNT(*) FROM recalls WHERE translated_at IS NULL")

    # ---- list ledger (basecrawler/ledger.py) -------------------------------------------
    def ledger_list(self, source: str, key: str, *, url: str | None, listed_date: str | None,
                    data: dict | None) -> None:
        """Note an item of a source's list; a known item keeps its state and attempts."""
        now = utc_now_iso()
        self.write(lambda db: db.conn.execute(
            "INSERT INTO list_ledger (source, key, url, listed_date, data, state, attempts, first_seen_at, last_seen_at) "
            "VALUES (?,?,?,?,?,'listed',0,?,?) ON CONFLICT(source, key) DO UPDATE SET "
            "url = COALESCE(excluded.url, list_ledger.url), "
            "listed_date = COALESCE(excluded.listed_date, list_ledger.listed_date), "
            "data = COALESCE(excluded.data, list_ledger.data), last_seen_at = excluded.last_seen_at",
            [source, key, url, listed_date, json.dumps(data, ensure_ascii=False, default=str) if data else None, now, now]))

    def ledger_items(self, source: str, states: Iterable[str]) -> list[dict]:
        states = list(states)
        rows = self.query(
            f"SELECT * FROM list_ledger WHERE source = ? AND state IN ({','.join('?' * len(states))}) "
            "ORDER BY listed_date, key", [source, *states])
        for row in rows:
            row["data"] = json.loads(row["data"]) if row.get("data") else {}
        return rows

    def ledger_done(self, source: str, keys: Iterable[str]) -> int:
        """Mark items collected and resolve the dead letters of their failed attempts;
        returns how many letters were resolved."""
        keys = list(keys)
        if not keys:
            return 0
        now = utc_now_iso()

        def op(db):
            resolved = 0
            for key in keys:
                row = db.conn.execute("SELECT letters FROM list_ledger WHERE source = ? AND key = ?",
                                      [source, key]).fetchone()
                letters = json.loads(row[0]) if row and row[0] else []
                if letters:
                    resolved += db.conn.execute(
                        f"UPDATE dead_letters SET resolved_at = ? WHERE resolved_at IS NULL AND id IN "
                        f"({','.join('?' * len(letters))})", [now, *letters]).rowcount
                db.conn.execute(
                    "UPDATE list_ledger SET state = 'done', attempts = attempts + 1, last_attempt_at = ?, done_at = ?, "
                    "last_error = NULL, letters = NULL WHERE source = ? AND key = ?", [now, now, source, key])
            return resolved
        return self.write(op)

    def ledger_failed(self, source: str, key: str, error: str, *, max_attempts: int, count: bool = True,
                      letters: Iterable[int] = ()) -> dict:
        """One failed attempt; the item becomes `given_up` once it has used `max_attempts`."""
        now = utc_now_iso()

        def op(db):
            row = db.conn.execute("SELECT letters FROM list_ledger WHERE source = ? AND key = ?", [source, key]).fetchone()
            kept = (json.loads(row[0]) if row and row[0] else []) + list(letters)
            db.conn.execute(
                "UPDATE list_ledger SET attempts = attempts + ?, last_error = ?, last_attempt_at = ?, "
                "state = CASE WHEN attempts + ? >= ? THEN 'given_up' ELSE 'failing' END, letters = ? "
                "WHERE source = ? AND key = ?",
                [int(count), error[:2000], now, int(count), max_attempts, json.dumps(kept) if kept else None,
                 source, key])
            row = db.conn.execute("SELECT state, attempts FROM list_ledger WHERE source = ? AND key = ?",
                                  [source, key]).fetchone()
            return {"state": row[0], "attempts": row[1]} if row else {}
        return self.write(op)

    def ledger_requeue_given_up(self, source: str) -> int:
        return self.write(lambda db: db.conn.execute(
            "UPDATE list_ledger SET state = 'failing', attempts = 0 WHERE source = ? AND state = 'given_up'",
            [source]).rowcount)

    def ledger_counts(self, source: str) -> dict[str, int]:
        return {row["state"]: row["n"] for row in self.query(
            "SELECT state, COUNT(*) AS n FROM list_ledger WHERE source = ? GROUP BY state", [source])}

    # ---- meta -------------------------------------------------------------------------
    def set_meta(self, key: str, value: str) -> None:
        self.write(lambda db: db.conn.execute(
            "INSERT INTO meta (key, value, updated_at) VALUES (?,?,?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            [key, value, utc_now_iso()],
        ))

    def get_meta(self, key: str) -> str | None:
        return self.scalar("SELECT value FROM meta WHERE key = ?", [key])


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this pid exists (a pid we may not signal still exists)."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True


# ---- upsert helpers (pure) ------------------------------------------------------------
_PLAIN_COMPARED = tuple(c for c in _COMPARED_COLUMNS if c not in ("date_unknown", "extra"))


def _column_values(row: dict) -> tuple:
    """The compared columns in their stored types (what SQLite would hold after a write)."""
    extra = row.get("extra")
    if extra is not None and not isinstance(extra, str):
        extra = _extra_json(extra)
    return (int(bool(row.get("date_unknown"))), extra, *map(row.get, _PLAIN_COMPARED))


def _extra_json(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if not value:
        return None
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=_json_default)


def _merge(old: dict, new: dict) -> dict:
    """The row the COALESCE rule produces from a stored row and an incoming one."""
    merged = dict(old)
    for col in DATA_COLUMNS:
        value = new.get(col)
        if col == "extra":
            incoming = new.get("extra") or {}
            if isinstance(incoming, str):
                incoming = json.loads(incoming)
            # Inside extra too, a blank never erases a stored value.
            incoming = {k: v for k, v in incoming.items() if v is not None and v != "" and v != [] and v != {}}
            if not incoming:
                continue  # nothing new: keep the stored JSON text as it is
            old_extra = json.loads(old["extra"]) if old.get("extra") else {}
            combined = {**old_extra, **incoming}
            merged["extra"] = old.get("extra") if combined == old_extra else _extra_json(combined)
        elif col in ("recall_date", "date_unknown"):
            # A sentinel date never replaces a real stored date.
            if new.get("date_unknown") and not old.get("date_unknown"):
                continue
            merged[col] = int(value) if col == "date_unknown" else value
        elif value is not None:
            merged[col] = value
    return merged


def _fold_same_key(rows: list[dict]) -> list[dict]:
    """Two rows with one key in a batch (an addendum repeating an alert) fold into one."""
    by_key: dict[tuple, dict] = {}
    for row in rows:
        key = (row["country"], row["recall_number"])
        if key in by_key:
            first = by_key[key]
            merged = _merge({**first, "extra": _extra_json(first.get("extra"))}, row)
            merged["extra"] = json.loads(merged["extra"]) if merged.get("extra") else {}
            merged["_raw"] = row["_raw"]
            by_key[key] = merged
        else:
            by_key[key] = row
    return list(by_key.values())


_EXTRA_AT = DATA_COLUMNS.index("extra")
_DATE_UNKNOWN_AT = DATA_COLUMNS.index("date_unknown")


def _sql_params(row: dict, now: str) -> list:
    # Hot path (once per written row): one comprehension, then the two columns needing a
    # conversion, instead of a branch per column.
    get = row.get
    params = [get(col) for col in DATA_COLUMNS]
    params[_EXTRA_AT] = _extra_json(params[_EXTRA_AT])
    params[_DATE_UNKNOWN_AT] = int(bool(params[_DATE_UNKNOWN_AT]))
    params.append(manufacturer_key(row.get("manufacturer_original")))  # derived, never sent by a source
    params += (now, now)
    return params


def _build_upsert_sql() -> str:
    cols = list(DATA_COLUMNS) + ["manufacturer_key", "first_seen_at", "updated_at"]
    marks = ", ".join("?" * len(cols))
    sets = []
    for col in DATA_COLUMNS:
        if col in ("country", "recall_number"):
            continue
        if col in ("recall_date", "date_unknown"):
            sets.append(
                f"[{col}] = CASE WHEN excluded.date_unknown = 1 AND recalls.date_unknown = 0 "
                f"THEN recalls.[{col}] ELSE excluded.[{col}] END"
            )
        else:
            sets.append(f"[{col}] = COALESCE(excluded.[{col}], recalls.[{col}])")
    changed_any = []
    for original, korean in zip(ORIGINAL_COLUMNS, KOREAN_COLUMNS):
        changed = f"(excluded.[{original}] IS NOT NULL AND excluded.[{original}] IS NOT recalls.[{original}])"
        changed_any.append(changed)
        sets.append(f"[{korean}] = CASE WHEN {changed} THEN NULL ELSE recalls.[{korean}] END")
    any_changed = " OR ".join(changed_any)
    sets.append(f"translated_at = CASE WHEN {any_changed} THEN NULL ELSE recalls.translated_at END")
    sets.append(f"translation_status = CASE WHEN {any_changed} THEN NULL ELSE recalls.translation_status END")
    sets.append(f"translation_note = CASE WHEN {any_changed} THEN NULL ELSE recalls.translation_note END")
    sets.append("manufacturer_key = COALESCE(excluded.manufacturer_key, recalls.manufacturer_key)")
    sets.append("updated_at = excluded.updated_at")
    return (
        f"INSERT INTO recalls ({', '.join(f'[{c}]' for c in cols)}) VALUES ({marks}) "
        f"ON CONFLICT(country, recall_number) DO UPDATE SET {', '.join(sets)}"
    )


_UPSERT_SQL = _build_upsert_sql()
_FEED_FTS_SQL = (f"INSERT INTO recalls_fts(rowid, {', '.join(FTS_COLUMNS)}) "
                 f"SELECT id, {', '.join(FTS_COLUMNS)} FROM recalls WHERE id > ?")

__all__ = ["Store", "UpsertResult", "DATA_COLUMNS", "TEXT_FIELDS", "encode_raw", "decode_raw", "is_locked_error"]
