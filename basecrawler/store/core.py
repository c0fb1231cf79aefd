"""The store: opening (WAL, busy timeout, migrations, the tables of record types), the COALESCE
upsert of records of any type, run records, dead letters. The only module that writes records.

Two engines, one contract: a path is a SQLite file (the default, no server); a
`postgresql://…` URL is a PostgreSQL database reached through psycopg 3 (engines/pg.py), whose
adapter takes the same SQL, so every method here and every `store.write(…)` elsewhere runs on
both.

Each record type's table, key, indexes and upsert are derived from its declaration
(basecrawler/recordtypes: tables.py, upsert.py); nothing here names a type or a field of one.
The merge rule (a NULL never erases, an unknown date never replaces a known one, a changed
original is translated again, an unchanged row is not written) is `UpsertPlan.merge` /
`decide`, and only there: this module and engines/pg_upsert.py write the rows it returns as
they are, and count what it decided. Besides:
- a failing batch is bisected down to the rows that break it; only those become dead letters;
- new rows reach the full-text index with one statement per batch (`tables.feed_fts_sql`): a
  per-row insert trigger cost about three times as much (bench/README.md). Updates and
  deletes, from here or any other writer, still go through the triggers of tables.py.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import sqlite3
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import sqlite_utils
from pydantic import BaseModel

from basecrawler.errors import CrawlerError
from basecrawler.formats.dates import EARLIEST_PLAUSIBLE_DATE, latest_plausible_date, utc_now_iso
from basecrawler.store.engines import is_postgres_url, redact
from basecrawler.recordtypes import RecordType, get_record_type, record_types
from basecrawler.recordtypes.declaration import DATE_UNKNOWN
from basecrawler.recordtypes.registry import DEFAULT_RECORD_TYPE
from basecrawler.recordtypes.tables import (feed_fts_sql, fts_insert_trigger, fts_table, input_index, pg_trgm_index_name,
                                            pg_windows_index_name)
from basecrawler.recordtypes.upsert import GIVEN_HASH, INPUT_HASH, NEW, UNCHANGED, UPDATED, UpsertPlan, plan_for
from basecrawler.store.deadletters import DeadLetters, decode_raw, encode_raw
from basecrawler.store.finishing import Finisher
from basecrawler.store.runs import Runs, pid_alive
from basecrawler.store.schema import ensure_types, migrate

log = logging.getLogger(__name__)

LOCK_RETRIES = 5
LOCK_RETRY_BASE_WAIT_S = 0.2
BUSY_TIMEOUT_MS = 30_000


@dataclass
class UpsertResult:
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    failed: list[tuple[dict, str]] = field(default_factory=list)  # (row, error)
    merged: int = 0   # rows folded into another row of the same key in this batch
    by_key: dict[tuple, str] = field(default_factory=dict)  # key (source first) → new / updated / unchanged
    # `upsert(…, behind=True)`: the batch's commit, still running when upsert returned (its
    # result() raises if the batch was not stored); None when it was committed before.
    finishing: Future | None = None

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


# A row's statement parameters made ahead of the write (`_upsert_finishing_behind`).
_PARAMS = "_params"


class _BatchRefused(CrawlerError):
    """A batch written at once had a row the engine refused (its transaction is rolled back).
    Never leaves the store: the batch is then written again, bisected."""

    kind = "batch_refused"


# SQLite's codes for a failure that is the database's, not a row's: the disk is full, or it
# cannot be written. Bisecting would only make every row a dead letter.
_NOT_A_ROWS_FAULT = (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CORRUPT)


def _refused_row(db, exc: BaseException) -> bool:
    """Whether a failed write may be bisected to the rows that broke it: not a lock (the whole
    transaction is retried), not a full or broken database, and the transaction still open
    (SQLite rolls it all back itself on some errors)."""
    primary_code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF   # (the extended code's low byte)
    if is_locked_error(exc) or primary_code in _NOT_A_ROWS_FAULT:
        return False
    return db.conn.in_transaction


def is_locked_error(exc: BaseException) -> bool:
    """SQLite's `database is locked`, or PostgreSQL's deadlock / serialisation failure: the
    whole transaction may simply run again."""
    if isinstance(exc, sqlite3.OperationalError):
        return "database is locked" in str(exc) or "database is busy" in str(exc)
    if isinstance(exc, _db_errors()[1:]):   # psycopg's errors, and a lost connection (engines/pg.py)
        from basecrawler.store.engines.pg import is_retryable
        return is_retryable(exc)
    return False


def _db_errors() -> tuple[type[BaseException], ...]:
    """Errors by which a database refuses a row, whatever the engine."""
    try:
        import psycopg
    except ImportError:
        return (sqlite3.Error,)
    return (sqlite3.Error, psycopg.Error)


class Store:
    """One SQLite database file (or `:memory:`), or a PostgreSQL database (`postgresql://…`).
    Thread-safe: one connection per Store, writes serialised."""

    def __init__(self, path: str | Path = "basecrawler.db"):
        self.path = str(path)
        self.engine = "postgresql" if is_postgres_url(self.path) else "sqlite"
        # One small repository per table, each with its own SQL; the methods below delegate.
        self.runs = Runs(self)
        self.dead_letters = DeadLetters(self)
        self._write_lock = threading.RLock()
        self._finisher = Finisher()   # a SQLite batch finishing behind the caller (finishing.py)
        self._finishing_keys: tuple[str, set[tuple]] = ("", set())   # its table and keys
        self._reading: sqlite3.Connection | None = None   # lookups meanwhile (_known_inputs_meanwhile)
        # (psycopg's errors only where they can happen: importing it costs an SQLite run 0.1 s)
        self._refused = (sqlite3.Error,) if self.engine == "sqlite" else _db_errors()
        if self.engine == "postgresql":
            self._open_postgres()
            return
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._file = Path(self.path).resolve()
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if self.path != ":memory:":
            self._with_lock_retry(lambda: conn.execute("PRAGMA journal_mode = WAL"))
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        self._db = sqlite_utils.Database(conn)
        self._with_lock_retry(lambda: migrate(self.db))
        self.ensure_type_tables()

    def _open_postgres(self) -> None:
        try:
            from basecrawler.store.engines.pg import PgDatabase
        except ImportError as exc:   # psycopg is the optional extra "pg"
            from basecrawler.errors import ConfigError
            raise ConfigError(f"{redact(self.path)} needs psycopg 3: pip install 'basecrawler[pg]' ({exc})") from exc
        self._db = PgDatabase(self.path)
        self.ensure_type_tables()   # migrate_pg: the numbered schema and every type's tables

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

    @property
    def db(self):
        """The database (sqlite-utils' `Database`, or engines/pg.py's adapter). Waits first for a
        batch finishing behind the caller, so nothing else ever runs on the connection meanwhile."""
        if self._finisher.busy:
            self.settle()
        return self._db

    def settle(self) -> None:
        """Wait until the batch an `upsert(…, behind=True)` left finishing is committed; raise
        its failure (the batch was then rolled back whole)."""
        with self._write_lock:
            self._finisher.settle()

    def close(self) -> None:
        try:
            with self._write_lock:
                self._finisher.close()
        finally:
            if self._reading is not None:
                self._reading.close()
            self._db.conn.close()

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
    def transaction(self, finish=None) -> Iterator[sqlite_utils.Database]:
        """BEGIN IMMEDIATE … COMMIT under the write lock (takes the SQLite write lock up front,
        so two writers queue on busy_timeout instead of failing half-way). `finish(conn)`, when
        given, ends the transaction in place of the COMMIT, still under the lock (a batch
        finishing behind: `_upsert_finishing_behind`)."""
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
                if finish is None:
                    conn.execute("COMMIT")
                else:
                    finish(conn)

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

    # ---- records of any type ------------------------------------------------------------
    def ensure_type_tables(self) -> None:
        """Create or evolve the table of every known record type (a type module dropped in
        gets its table; a field added to a model, its column). Runs on open."""
        if self.engine == "postgresql":
            from basecrawler.store.engines.pg_migrations import migrate_pg   # psycopg: the optional extra "pg"
            self._with_lock_retry(lambda: migrate_pg(self.db.conn))
        else:
            self._with_lock_retry(lambda: ensure_types(self.db))
        self._feed_fts: dict[str, str | None] = {}

    def _fts_feed(self, record_type: RecordType) -> str | None:
        """The per-batch index feed of a type's table, or None: PostgreSQL searches through a
        pg_trgm index on the columns themselves, and a table still carrying the per-row insert
        trigger (a store from before it was dropped) is fed by it; feeding it here as well
        would index new rows twice."""
        if record_type.table not in self._feed_fts:
            feed = None
            if self.engine == "sqlite" and not self.db.conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?",
                    [fts_insert_trigger(record_type)]).fetchone():
                feed = feed_fts_sql(record_type)
            self._feed_fts[record_type.table] = feed
        return self._feed_fts[record_type.table]

    def rebuild_search_indexes(self) -> None:
        """Rebuild every type's SQLite full-text index from its table (after rows were copied
        in by hand, e.g. `migrate --to` a SQLite file); PostgreSQL's trigram indexes need nothing."""
        if self.engine != "sqlite":
            return
        for record_type in record_types().values():
            if record_type.text_index_columns:
                name = fts_table(record_type)
                self.write(lambda db, name=name: db.conn.execute(f"INSERT INTO [{name}]([{name}]) VALUES ('rebuild')"))

    @property
    def _feed_fts_per_batch(self) -> bool:
        """Whether the default type's table is fed per batch (tests and the bench ask)."""
        return self._fts_feed(get_record_type(DEFAULT_RECORD_TYPE)) is not None

    def upsert(self, record_type: RecordType | str, records: Iterable[BaseModel], *, source: str,
               raws: list | None = None, input_hashes: list[str | None] | None = None,
               behind: bool = False) -> UpsertResult:
        """Store one batch of validated records of one type with the COALESCE rule; exact new /
        updated / unchanged / merged counts. `raws` (same order as `records`) is what a failing
        row's dead letter keeps; `input_hashes` (same order; the pipeline's, see
        pipeline/records.py) say which input each record was made from: a record without one
        gets the hash of its own values.

        `behind=True` (SQLite files; the pipeline asks it): return once the rows are written,
        and let the batch's full-text feed and COMMIT run on a background thread while the
        caller makes its next batch (finishing.py). `result.finishing` then says whether the
        batch was stored; any later use of the store waits for it first."""
        plan = plan_for(_type(record_type))
        rows = []
        for index, record in enumerate(records):
            row = plan.row_of(record, source)
            row["_raw"] = raws[index] if raws is not None else row
            row[INPUT_HASH] = input_hashes[index] if input_hashes is not None else None
            row[GIVEN_HASH] = row[INPUT_HASH] is not None
            rows.append(row)
        folded = plan.fold(rows)
        for row in folded:
            if row[INPUT_HASH] is None:
                row[INPUT_HASH] = plan.input_hash(row)
        try:
            if behind and self.engine == "sqlite" and self.path != ":memory:":
                result = self._with_lock_retry(lambda: self._upsert_finishing_behind(plan, folded, utc_now_iso()))
            else:
                result = self.write(lambda db: self._upsert_batch(db, plan, folded))
        except _BatchRefused:
            # The engine refused a row of the batch written at once, and the whole batch was
            # rolled back with it: write it again, bisected, so exactly the bad rows fail.
            result = self.write(lambda db: self._upsert_batch(db, plan, folded, bisect=True))
        result.merged += len(rows) - len(folded)
        return result

    def known_inputs(self, record_type: RecordType | str, keys: Iterable[tuple],
                     dates: bool = True) -> dict[tuple, tuple]:
        """What the pipeline needs of the stored rows with these keys (tuples in `key_columns`
        order) to count a record made from the same input as unchanged without validating
        it: {key: (the row's `input_hash`, its date)} (the date None for a type without one,
        and when `dates` is false: a run without a window has no use for it). On SQLite read
        from the covering index of the key and these columns (`tables.input_index`), never
        the table: a re-run of unchanged data reads nothing else of the stored rows (an index
        on the hash alone had doubled the insert cost of a large store, every insert landing
        on a random page; this one is ordered by key like the unique index). Tuples, not
        rows: a re-run reads one per record."""
        rt = _type(record_type)
        # None: a NULL read in the date's place, so every value has one shape (hash, date).
        columns = (INPUT_HASH, rt.date_field if dates else None)
        if self.engine == "sqlite":
            # Named, as the planner otherwise may take the unique key index and read the table
            # row by row (it did for a four-column key): the covering one answers from itself.
            with self._write_lock:
                if self._finisher.busy:
                    return self._known_inputs_meanwhile(rt, keys, columns)
                return self._sqlite_rows_by_key(rt, keys, columns, indexed_by=input_index(rt)[0], as_values=True)
        from basecrawler.store.engines.pg_lookup import values_by_key
        with self._write_lock:
            return values_by_key(self.db.conn, rt, keys, columns)

    def _known_inputs_meanwhile(self, rt: RecordType, keys: Iterable[tuple], columns: tuple) -> dict[tuple, tuple]:
        """`known_inputs` while a batch is finishing behind, without waiting for it: the
        committed file read through a second connection (WAL), less the keys that batch holds,
        whose rows are about to change (their records go the whole way, and the store sees
        them after the batch). A lookup every 500 records would otherwise wait for each batch
        and leave nothing to overlap."""
        table, held = self._finishing_keys
        found = self._sqlite_rows_by_key(rt, keys, columns, indexed_by=input_index(rt)[0], as_values=True,
                                         conn=self._reader())
        if table == rt.table:
            for key in held.intersection(found):
                del found[key]
        return found

    def _reader(self) -> sqlite3.Connection:
        if self._reading is None:
            # The file opened at start (the working directory may have moved since), read only:
            # never a new empty file in its place.
            self._reading = sqlite3.connect(f"{self._file.as_uri()}?mode=ro", uri=True, check_same_thread=False,
                                            timeout=BUSY_TIMEOUT_MS / 1000)
        return self._reading

    def upsert_recalls(self, records: Iterable[BaseModel], *, source: str, raws: list | None = None) -> UpsertResult:
        """`upsert` of the default type (vehicle recalls), as callers before record types wrote it."""
        return self.upsert(DEFAULT_RECORD_TYPE, records, source=source, raws=raws)

    def _upsert_finishing_behind(self, plan: UpsertPlan, rows: list[dict], now: str) -> UpsertResult:
        """One attempt of `upsert(…, behind=True)`: the transaction of `write`, left open with
        the rows written; the index feed and the COMMIT go to the finisher."""
        # Each row's statement parameters as a new row, made before waiting for the batch
        # finishing: this Python work overlaps it (a row the lookup finds stored is merged and
        # gets its parameters then; one that cannot be made here is made, and fails, where the
        # write can tell which row it was).
        for row in rows:
            try:
                row[_PARAMS] = plan.params(row, now)
            except Exception:
                pass
        finishing: list[tuple[str, list]] = []
        written: list[UpsertResult] = []

        def hand_over(conn) -> None:   # in place of the COMMIT, under the write lock
            result = written[0]
            result.finishing = self._finisher.start(conn, finishing, self._file)
            self._finishing_keys = (plan.table, set(result.by_key))
        with self.transaction(finish=hand_over) as db:   # (waits for the batch before)
            written.append(self._upsert_batch(db, plan, rows, finishing=finishing, now=now))
        return written[0]

    def _upsert_batch(self, db, plan: UpsertPlan, rows: list[dict], bisect: bool = False,
                      finishing: list | None = None, now: str | None = None) -> UpsertResult:
        """The batch's lookup and writes inside the caller's transaction. The full-text feed of
        its new rows runs last, or, given `finishing`, is appended to it for the finisher."""
        result = UpsertResult()
        if self.engine == "postgresql":   # COPY + one insert, the rest merged; a refused batch goes on row by row below
            from basecrawler.store.engines.pg_upsert import merge_batch
            if merge_batch(db, plan, rows, result):
                return result
            # Concurrent writers lock rows in one order (by key), so they queue, never deadlock.
            rows = sorted(rows, key=plan.key)
        key = plan.key
        # First only each stored row's input hash (a re-run of the same input needs nothing
        # more); the whole stored rows only for the keys whose input differs. (PostgreSQL: the
        # rows are locked until the batch commits, so no other writer changes them between the
        # verdict and the write.)
        lock = self.engine == "postgresql"
        hashes = self.rows_by_key(plan.record_type, (key(r) for r in rows), ("id", INPUT_HASH), lock=lock)
        differing = [k for r in rows if (k := key(r)) in hashes and hashes[k][INPUT_HASH] != r[INPUT_HASH]]
        stored = {**hashes, **(self.rows_by_key(plan.record_type, differing, ("id", INPUT_HASH, *plan.written)) if differing else {})}
        now = now or utc_now_iso()
        feed = self._fts_feed(plan.record_type)
        # Every row this batch inserts gets an id above today's largest (INTEGER PRIMARY KEY
        # without AUTOINCREMENT takes max + 1), so `id > last_id` is exactly the new rows.
        last_id = (db.conn.execute(f"SELECT COALESCE(MAX(id), 0) FROM [{plan.table}]").fetchone()[0]
                   if feed else None)   # only the SQLite index feed needs it
        new_rows, changed, rehashed = _judge(plan, rows, stored, result)
        # New rows by a plain INSERT (SQLite: no other writer can add their keys since the
        # lookup, BEGIN IMMEDIATE), changed ones by the update of the merged row; each group at
        # once, or bisected when a first attempt was refused (always, on PostgreSQL: only a
        # batch the server refused comes here).
        write = self._write_bisecting if bisect or self.engine == "postgresql" else self._write_at_once
        written = itertools.chain(write(db, plan, new_rows, now, plan.insert_sql, lambda row, now: row.get(_PARAMS)
                                        or plan.params(row, now)),
                                  write(db, plan, changed, now, plan.update_sql, plan.update_params))
        taken: list[tuple[dict, str]] = []
        for row, outcome in written:
            if outcome in (NEW, UPDATED):
                setattr(result, outcome, getattr(result, outcome) + 1)
                result.by_key[key(row)] = outcome
            elif lock and outcome.startswith("UniqueViolation"):
                taken.append((row, outcome))   # (an update never changes a key: this was an insert)
            else:
                result.failed.append((row, outcome))
        if taken:
            rehashed += self._merge_taken(db, plan, taken, now, result)
        if rehashed:   # bookkeeping only: updated_at and the counts stay as they are
            db.conn.executemany(f"UPDATE [{plan.table}] SET {INPUT_HASH} = ? WHERE id = ?", rehashed)
        if result.new and feed:
            if finishing is None:
                db.conn.execute(feed, [last_id])
            else:
                finishing.append((feed, [last_id]))
        return result

    def _merge_taken(self, db, plan: UpsertPlan, taken: list[tuple[dict, str]], now: str,
                     result: UpsertResult) -> list[tuple[str, int]]:
        """PostgreSQL's row-by-row path: rows whose key another writer inserted after the
        lookup are judged against that row (now locked) by the same rule and written, never
        failed for it. Returns the unchanged rows' hashes to point at their input."""
        key = plan.key
        stored = self.rows_by_key(plan.record_type, [key(row) for row, _ in taken], ("id", INPUT_HASH, *plan.written),
                                  lock=True)
        errors = {id(row): error for row, error in taken}
        gone, changed, rehashed = _judge(plan, [row for row, _ in taken], stored, result)
        result.failed += [(row, errors[id(row)]) for row, _ in gone]   # gone again: the insert's refusal stands
        for row, outcome in self._write_bisecting(db, plan, changed, now, plan.update_sql, plan.update_params):
            if outcome == UPDATED:
                result.updated += 1
                result.by_key[key(row)] = UPDATED
            else:
                result.failed.append((row, outcome))
        return rehashed

    def rows_by_key(self, record_type: RecordType | str, keys: Iterable[tuple],
                    columns: Iterable[str] | None = None, *, lock: bool = False) -> dict[tuple, dict]:
        """Stored rows of a type by their keys (tuples in `key_columns` order, source first),
        in chunks of 500 values of the last key column per query. `lock` (PostgreSQL, inside a
        write): the rows stay locked until the transaction ends (SQLite's write transaction
        already holds the whole database)."""
        rt = _type(record_type)
        if self.engine == "postgresql":   # engines/pg_lookup.py: index probes, 1,000 keys a query
            from basecrawler.store.engines.pg_lookup import rows_by_key
            with self._write_lock:
                return rows_by_key(self.db.conn, rt, keys, columns, lock=lock)
        with self._write_lock:
            return self._sqlite_rows_by_key(rt, keys, columns)

    def _sqlite_rows_by_key(self, rt: RecordType, keys: Iterable[tuple], columns: Iterable[str] | None,
                            indexed_by: str | None = None, as_values: bool = False,
                            conn: sqlite3.Connection | None = None) -> dict[tuple, Any]:
        """`rows_by_key` on SQLite (through `conn`, the store's own by default); with
        `as_values`, {key: tuple of `columns`} instead of rows (no dict per row; a column None
        reads NULL). The keys returned hold the stored values: a key asked with a number for a
        text column (or text for a number) is found under the stored form, as a row's is."""
        conn = conn or self.db.conn
        key_columns = rt.key_columns
        key_of = plan_for(rt).key
        *prefix_columns, last = key_columns
        by_prefix: dict[tuple, list] = {}
        for key in keys:
            by_prefix.setdefault(tuple(key[:-1]), []).append(key[-1])
        prefix_sql = "".join(f"[{c}] = ? AND " for c in prefix_columns)
        index = f" INDEXED BY [{indexed_by}]" if indexed_by else ""
        prefix_kinds = [rt.column_types.get(c, str) for c in prefix_columns]
        found: dict[tuple, Any] = {}
        for prefix, values in by_prefix.items():
            # As values: the stored last key column and the columns; the prefix as asked when
            # each of its values has its column's type (compared as it is stored), else as stored.
            short = as_values and all(value.__class__ is kind for value, kind in zip(prefix, prefix_kinds))
            if columns is None:
                cols = "*"
            elif as_values:   # the key, then the columns (one may be a key column too)
                cols = ", ".join(f"[{c}]" if c else "NULL" for c in ([last, *columns] if short else [*key_columns, *columns]))
            else:
                cols = ", ".join(f"[{c}]" for c in dict.fromkeys([*key_columns, *columns]))
            width = len(key_columns)
            for start in range(0, len(values), 500):
                chunk = values[start:start + 500]
                where, params = f"[{last}] IN ({','.join('?' * len(chunk))})", [*prefix, *chunk]
                cursor = conn.execute(f"SELECT {cols} FROM [{rt.table}]{index} WHERE {prefix_sql}{where}", params)
                if short:
                    found.update((prefix + row[:1], row[1:]) for row in cursor)
                elif as_values:
                    found.update((row[:width], row[width:]) for row in cursor)
                else:
                    names = [d[0] for d in cursor.description]
                    for values_ in cursor:
                        row = dict(zip(names, values_))
                        found[key_of(row)] = row
        return found

    def _write_at_once(self, db, plan: UpsertPlan, items: list[tuple[dict, str]], now: str, sql: str, params_of):
        """Write items with one statement and no savepoint (a savepoint costs SQLite a
        sub-journal of every page the batch touches); a refused row raises `_BatchRefused`,
        and the caller rolls the transaction back and writes the batch bisected."""
        if not items:
            return []
        try:
            db.conn.executemany(sql, [params_of(row, now) for row, _ in items])
        except (*self._refused, TypeError, ValueError, OverflowError) as exc:  # a refused or unbindable row
            if not _refused_row(db, exc):
                raise
            raise _BatchRefused() from exc
        return items

    def _write_bisecting(self, db, plan: UpsertPlan, items: list[tuple[dict, str]], now: str, sql: str, params_of):
        """Write items inside a savepoint; on failure split in halves until the bad rows are
        alone. Yields (row, outcome) with outcome 'new' / 'updated' or the error text."""
        if not items:
            return
        savepoint = "upsert_batch"
        db.conn.execute(f"SAVEPOINT {savepoint}")
        try:
            db.conn.executemany(sql, [params_of(row, now) for row, _ in items])
        except (*self._refused, TypeError, ValueError, OverflowError) as exc:  # a refused or unbindable row
            if self.engine == "sqlite" and not _refused_row(db, exc):
                raise   # (the transaction, savepoint and all, is rolled back by the caller or was already)
            db.conn.execute(f"ROLLBACK TO SAVEPOINT {savepoint}")
            db.conn.execute(f"RELEASE SAVEPOINT {savepoint}")
            if is_locked_error(exc):
                raise
            if len(items) == 1:
                yield items[0][0], f"{type(exc).__name__}: {exc}"
                return
            middle = len(items) // 2
            yield from self._write_bisecting(db, plan, items[:middle], now, sql, params_of)
            yield from self._write_bisecting(db, plan, items[middle:], now, sql, params_of)
            return
        db.conn.execute(f"RELEASE SAVEPOINT {savepoint}")
        yield from items

    def count(self, record_type: RecordType | str, source: str | None = None) -> int:
        table = _type(record_type).table
        if source is None:
            return self.scalar(f"SELECT COUNT(*) FROM [{table}]")
        return self.scalar(f"SELECT COUNT(*) FROM [{table}] WHERE source = ?", [source])

    def get(self, record_type: RecordType | str, key: dict) -> dict | None:
        """The stored row with these key values (JSON columns decoded); without `source` in
        `key`, the oldest such row of any source."""
        rt = _type(record_type)
        unknown = [name for name in key if name not in rt.key_columns]
        if unknown:
            raise ValueError(f"{', '.join(unknown)} not in the key of {rt.name} ({', '.join(rt.key_columns)})")
        where = " AND ".join(f"[{name}] = ?" for name in key) or "1 = 1"
        rows = self.query(f"SELECT * FROM [{rt.table}] WHERE {where} ORDER BY id LIMIT 1", list(key.values()))
        return decode_row(rt, rows[0]) if rows else None

    def existing_keys(self, record_type: RecordType | str, keys: Iterable[tuple]) -> set[tuple]:
        """Which of these keys (source first) are stored already."""
        rt = _type(record_type)
        return set(self.rows_by_key(rt, keys, rt.key_columns))

    def same_as(self, record_type: RecordType | str, row: dict) -> list[dict]:
        """Records of any type that are the same thing as `row` published elsewhere: the same
        value in their declared `same_as_field` (a Transport Canada recall number in `ca` and
        in the Canada-wide alerts) and the same country when both have one; `row` itself left
        out. Linked for a reader, never merged: each source keeps its own record. Each match
        carries its `record_type`."""
        rt = _type(record_type)
        value = row.get(rt.same_as_field) if rt.same_as_field else None
        if value is None or value == "":
            return []
        country = row.get("country") if "country" in rt.column_types else None
        found = []
        for other in record_types().values():
            if not other.same_as_field:
                continue
            where, params = [f"[{other.same_as_field}] = ?"], [value]
            if country and "country" in other.column_types:
                where.append("(country = ? OR country IS NULL)")
                params.append(country)
            if other.table == rt.table:   # not the row itself
                if row.get("id") is not None:
                    where.append("id <> ?")
                    params.append(row["id"])
                else:
                    where.append("NOT (" + " AND ".join(f"[{c}] IS ?" for c in rt.key_columns) + ")")
                    params += [row.get(c) for c in rt.key_columns]
            for match in self.query(f"SELECT * FROM [{other.table}] WHERE {' AND '.join(where)} ORDER BY id", params):
                found.append({"record_type": other.name, **decode_row(other, match)})
        return found

    def newest_date(self, record_type: RecordType | str, source: str, today) -> str | None:
        """Newest plausible date of a source's records of a type (the incremental watermark): a
        date outside `dates.is_plausible_date` (a 9999-12-31 stored before dates were checked)
        does not count."""
        rt = _type(record_type)
        if rt.date_field is None:
            return None
        known = f" AND {DATE_UNKNOWN} = 0" if rt.has_date_unknown else ""
        return self.scalar(
            f"SELECT MAX([{rt.date_field}]) FROM [{rt.table}] WHERE source = ?{known} "
            f"AND [{rt.date_field}] >= ? AND [{rt.date_field}] <= ?",
            [source, EARLIEST_PLAUSIBLE_DATE.isoformat(), latest_plausible_date(today).isoformat()])

    def server_facts(self) -> tuple[str, int | None, bool]:
        """PostgreSQL only (for `doctor`): the server version, the schema version reached and
        whether the pg_trgm extension the search index needs is installed."""
        return (self.scalar("SHOW server_version"), self.scalar("SELECT MAX(version) FROM schema_version"),
                bool(self.scalar("SELECT COUNT(*) FROM pg_extension WHERE extname = 'pg_trgm'")))

    def search_indexes(self) -> dict[str, str | None]:
        """PostgreSQL only (for `doctor`): per table of a type with searched text, its search
        index — "windows" (terms of every length), "trgm" (3+ characters; a shorter term reads
        the table) or None."""
        found = {}
        for record_type in record_types().values():
            if not record_type.text_index_columns:
                continue
            names = {pg_windows_index_name(record_type): "windows", pg_trgm_index_name(record_type): "trgm"}
            held = [names[name] for (name,) in self.db.conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND indexname IN (?, ?)",
                list(names)).fetchall()]
            found[record_type.table] = "windows" if "windows" in held else held[0] if held else None
        return found

    # The default type (vehicle recalls) under the names callers used before record types.
    def newest_recall_date(self, source: str, today) -> str | None:
        return self.newest_date(DEFAULT_RECORD_TYPE, source, today)

    def count_recalls(self, source: str | None = None) -> int:
        return self.count(DEFAULT_RECORD_TYPE, source)

    def get_recall(self, *key: str) -> dict | None:
        """The oldest stored default-type row with these key values (source left out)."""
        rt = get_record_type(DEFAULT_RECORD_TYPE)
        return self.get(rt, dict(zip(rt.key, (key[0].upper(), *key[1:]))))

    # ---- runs and dead letters: their repositories (runs.py, deadletters.py) ------------
    def start_run(self, source: str, mode: str, status: str, pid: int, since=None, until=None) -> int:
        return self.runs.start_run(source, mode, status, pid, since, until)

    def update_run(self, run_id: int, **fields: Any) -> None:
        return self.runs.update_run(run_id, **fields)

    def close_dead_runs(self, *, exclude_run_id: int | None = None, lock_held: bool = False) -> list[int]:
        return self.runs.close_dead_runs(exclude_run_id=exclude_run_id, lock_held=lock_held)

    def session(self) -> str:
        return self.runs.session()

    def session_alive(self, token: str) -> bool:
        return self.runs.session_alive(token)

    def last_run(self, source: str) -> dict | None:
        return self.runs.last_run(source)

    def sources_with_runs(self) -> set[str]:
        return self.runs.sources_with_runs()

    def last_successful_run(self, source: str) -> dict | None:
        return self.runs.last_successful_run(source)

    def run_problem_counts(self, source: str) -> dict[str, int]:
        return self.runs.run_problem_counts(source)

    def add_dead_letter(self, *, source: str, run_id: int | None, stage: str, kind: str, error: str,
                        raw: Any, record_key: str | None = None, url: str | None = None,
                        response_sha256: str | None = None, record_type: str | None = None) -> int:
        return self.dead_letters.add_dead_letter(source=source, run_id=run_id, stage=stage, kind=kind, error=error,
                                                 raw=raw, record_key=record_key, url=url,
                                                 response_sha256=response_sha256, record_type=record_type)

    def open_dead_letters(self, source: str | None = None) -> list[dict]:
        return self.dead_letters.open_dead_letters(source)

    def dead_letter_retried(self, letter_id: int, *, error: str | None, at: str) -> None:
        return self.dead_letters.dead_letter_retried(letter_id, error=error, at=at)

    def list_dead_letters(self, source: str | None = None, *, include_resolved: bool = False,
                          limit: int = 100) -> list[dict]:
        return self.dead_letters.list_dead_letters(source, include_resolved=include_resolved, limit=limit)

    def sources_with_open_dead_letters(self) -> list[str]:
        return self.dead_letters.sources_with_open_dead_letters()

    def count_open_dead_letters(self, source: str | None = None) -> int:
        return self.dead_letters.count_open_dead_letters(source)

    # ---- what `status` shows ------------------------------------------------------------
    def enrichment_counts(self, source: str) -> dict[str, int]:
        """Enrichment items by state, `retry` per level (retry1 … retry4: how close to `gone`)."""
        return {row["state"]: row["n"] for row in self.query(
            "SELECT CASE WHEN state = 'retry' THEN 'retry' || level ELSE state END AS state, COUNT(*) AS n "
            "FROM enrichment WHERE source = ? GROUP BY 1 ORDER BY 1", [source])}

    def translation_counts(self, source: str) -> dict[str, int]:
        """Records of every type by translation state: pending, translated, or the status the
        worker set."""
        counts: dict[str, int] = {}
        for rt in _types_translated():
            for row in self.query(
                    "SELECT CASE WHEN translated_at IS NULL THEN 'pending' ELSE COALESCE(translation_status, 'translated') "
                    f"END AS s, COUNT(*) AS n FROM [{rt.table}] WHERE source = ? GROUP BY s", [source]):
                counts[row["s"] or "pending"] = counts.get(row["s"] or "pending", 0) + row["n"]
        return dict(sorted(counts.items()))

    def translation_backlog(self) -> int:
        return sum(self.scalar(f"SELECT COUNT(*) FROM [{rt.table}] WHERE translated_at IS NULL")
                   for rt in _types_translated())

    # ---- list ledger (basecrawler/pipeline/ledger.py) -------------------------------------------
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


def decode_row(record_type: RecordType, row: dict) -> dict:
    """A stored row with its JSON columns decoded: `extra` a dict, multi-valued fields lists
    (empty when the column is NULL: an empty list is stored as NULL, so a blank never erases)."""
    for column in record_type.json_columns:
        if column not in row:
            continue
        value = row[column]
        if isinstance(value, str):
            value = json.loads(value) if value else None
        if value is None:
            value = {} if column == "extra" else []
        row[column] = value
    return row


def _types_translated() -> list[RecordType]:
    return [rt for rt in record_types().values() if rt.translated]


def _type(record_type: RecordType | str) -> RecordType:
    return record_type if isinstance(record_type, RecordType) else get_record_type(record_type)


def __getattr__(name: str):
    """Names of the store before record types, derived from the default type on first use."""
    if name == "DATA_COLUMNS":   # the columns a crawl writes, derived ones left out
        plan = plan_for(get_record_type(DEFAULT_RECORD_TYPE))
        return plan.written
    if name == "_FEED_FTS_SQL":
        return feed_fts_sql(get_record_type(DEFAULT_RECORD_TYPE))
    if name == "TEXT_FIELDS":
        return get_record_type(DEFAULT_RECORD_TYPE).translated
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Store", "UpsertResult", "decode_row", "encode_raw", "decode_raw", "is_locked_error", "pid_alive"]


def _judge(plan: UpsertPlan, rows: list[dict], stored: dict, result: UpsertResult
           ) -> tuple[list[tuple[dict, str]], list[tuple[dict, str]], list[tuple[str, int]]]:
    """The one merge rule over a batch against its stored rows: (new rows, merged rows to
    update, (input hash, id) to repoint); unchanged rows are counted here, so what is written
    is what is counted."""
    new_rows, changed, rehashed = [], [], []
    for row in rows:
        old = stored.get(plan.key(row))
        outcome, merged = plan.decide(old, row)
        if outcome == NEW:
            new_rows.append((row, NEW))
        elif outcome == UPDATED:
            changed.append((merged, UPDATED))
        else:
            result.unchanged += 1
            result.by_key[plan.key(row)] = UNCHANGED
            if row.get(GIVEN_HASH) and old[INPUT_HASH] != row[INPUT_HASH]:
                # Another input that changes nothing: the stored row now stands for this input
                # too (its hash is all that is written), so the next run recognises it
                # unvalidated. (A hash of its own values would name no input.)
                rehashed.append((row[INPUT_HASH], old["id"]))
    return new_rows, changed, rehashed
