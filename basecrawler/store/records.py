"""Writing the records of any type: the upsert of one batch, its counts, the rows the engine
refuses, the full-text feed of the new rows. Reached as `store.records` (`store.upsert` calls
it); the only module that writes records.

Each record type's table, key, indexes and upsert are derived from its declaration
(basecrawler/recordtypes: tables.py, upsert.py); nothing here names a type or a field of one.
The merge rule (a NULL never erases, an unknown date never replaces a known one, a changed
original is translated again, an unchanged row is not written) is `UpsertPlan.merge` /
`decide`, and only there: this module and engines/pg_upsert.py write the rows it returns as
they are, and count what it decided (`_judge`), so what is written is what is counted. Besides:
- a failing batch is bisected down to the rows that break it; only those become dead letters;
- new rows reach the full-text index with one statement per batch (`tables.feed_fts_sql`), not a
  per-row insert trigger (bench/README.md). Updates and deletes, from here or any other writer,
  still go through the triggers of tables.py.
"""
from __future__ import annotations

import itertools
import sqlite3
from concurrent.futures import Future
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Iterable

from pydantic import BaseModel

from basecrawler.errors import CrawlerError
from basecrawler.formats.dates import utc_now_iso
from basecrawler.recordtypes import RecordType, get_record_type, record_types
from basecrawler.recordtypes.registry import DEFAULT_RECORD_TYPE
from basecrawler.recordtypes.tables import feed_fts_sql, fts_insert_trigger, fts_table
from basecrawler.recordtypes.upsert import GIVEN_HASH, INPUT_HASH, NEW, UNCHANGED, UPDATED, UpsertPlan, plan_for
from basecrawler.store.engines.dialect import SQLITE, dialect_of
from basecrawler.store.dberrors import is_locked_error, refused_errors, refused_row
from basecrawler.store.lookup import record_type_of


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


_ROW = itemgetter(0)   # of a written (row, outcome)
_SAVEPOINT = "upsert_batch"


class _BatchRefused(CrawlerError):
    """A batch written at once had a row the engine refused (its transaction is rolled back).
    Never leaves this module: the batch is then written again, bisected."""

    kind = "batch_refused"


class Records:
    """The record writes of one store (its transactions, lock retries and lookups)."""

    def __init__(self, store):
        self.store = store
        self.refused = refused_errors(store.engine)
        # Per table, the statement that feeds its new rows to the full-text index, or None
        # (`fts_feed`); looked up once per table, emptied when the tables are evolved.
        self.fts_feeds: dict[str, str | None] = {}

    def fts_feed(self, record_type: RecordType) -> str | None:
        """The per-batch index feed of a type's table, or None: PostgreSQL searches through a
        pg_trgm index on the columns themselves, and a table still carrying the per-row insert
        trigger (a store from before it was dropped) is fed by it; feeding it here as well
        would index new rows twice."""
        if record_type.table not in self.fts_feeds:
            feed = None
            if self.store.engine == "sqlite" and not self.store.db.conn.execute(SQLITE.query(
                    "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?"),
                    [fts_insert_trigger(record_type)]).fetchone():
                feed = feed_fts_sql(record_type)
            self.fts_feeds[record_type.table] = feed
        return self.fts_feeds[record_type.table]

    @property
    def feeds_fts_per_batch(self) -> bool:
        """Whether the default type's table is fed per batch (tests and the bench ask)."""
        return self.fts_feed(get_record_type(DEFAULT_RECORD_TYPE)) is not None

    def rebuild_search_indexes(self) -> None:
        """Rebuild every type's SQLite full-text index from its table (after rows were copied
        in by hand, e.g. `migrate --to` a SQLite file); PostgreSQL's trigram indexes need nothing."""
        if self.store.engine != "sqlite":
            return
        for record_type in record_types().values():
            if record_type.text_index_columns:
                name = fts_table(record_type)
                self.store.write(lambda db, name=name: db.conn.execute(
                    SQLITE.write(f"INSERT INTO [{name}]([{name}]) VALUES ('rebuild')")))

    def upsert(self, record_type: RecordType | str, records: Iterable[BaseModel], *, source: str,
               raws: list | None = None, input_hashes: list[str | None] | None = None,
               behind: bool = False, unstored: bool = False) -> UpsertResult:
        """Store one batch of validated records of one type with the COALESCE rule; exact new /
        updated / unchanged / merged counts. `raws` (same order as `records`) is what a failing
        row's dead letter keeps; `input_hashes` (same order; the pipeline's, see
        pipeline/records.py) say which input each record was made from: a record without one
        gets the hash of its own values.

        `behind=True` (SQLite files; the pipeline asks it): return once the rows are written,
        and let the batch's full-text feed and COMMIT run on a background thread while the
        caller makes its next batch (finishing.py). `result.finishing` then says whether the
        batch was stored; any later use of the store waits for it first.

        `unstored=True`: the caller knows that no stored row has any of the batch's keys (the
        pipeline's first import of a type, pipeline/intake.py), so they are not looked up. A
        caller that is wrong costs time, not data: the key's unique index refuses the row, and
        the batch is written again with the lookup, merged as ever (SQLite; PostgreSQL always
        looks up)."""
        store = self.store
        plan = plan_for(record_type_of(record_type))
        behind = behind and store.engine == "sqlite" and store.path != ":memory:"
        now = utc_now_iso() if behind else None
        rows = plan.rows_of(records, source, raws, input_hashes, now)
        folded = plan.fold(rows)
        for row in folded:
            if row[INPUT_HASH] is None:
                row[INPUT_HASH] = plan.input_hash(row)
        try:
            if behind:
                result = store.with_lock_retry(lambda: self._upsert_finishing_behind(plan, folded, now, unstored))
            else:
                result = store.write(lambda db: self.write_batch(db, plan, folded, unstored=unstored))
        except _BatchRefused:
            # The engine refused a row of the batch written at once, and the whole batch was
            # rolled back with it: write it again, bisected, so exactly the bad rows fail.
            result = store.write(lambda db: self.write_batch(db, plan, folded, bisect=True))
        result.merged += len(rows) - len(folded)
        return result

    def _upsert_finishing_behind(self, plan: UpsertPlan, rows: list[dict], now: str, unstored: bool) -> UpsertResult:
        """One attempt of `upsert(…, behind=True)`: the transaction of `write`, left open with
        the rows written; the index feed and the COMMIT go to the store's finisher."""
        # (Each row's INSERT parameters were made by `rows_of`, before waiting for the batch
        # finishing, so that Python work overlaps it; a row folded from two, or without a given
        # hash, gets them at the write: `params_ahead`.)
        finishing: list[tuple[str, list]] = []
        written: list[UpsertResult] = []

        def hand_over(conn) -> None:   # in place of the COMMIT, under the write lock
            result = written[0]
            result.finishing = self.store.finisher.start(conn, finishing, self.store.file,
                                                         held=(plan.table, result.by_key.keys()))
        with self.store.transaction(finish=hand_over) as db:   # (waits for the batch before)
            written.append(self.write_batch(db, plan, rows, finishing=finishing, now=now, unstored=unstored))
        return written[0]

    def write_batch(self, db, plan: UpsertPlan, rows: list[dict], bisect: bool = False,
                    finishing: list | None = None, now: str | None = None, unstored: bool = False) -> UpsertResult:
        """The batch's lookup and writes inside the caller's transaction (without the lookup
        when the caller knows the keys are `unstored`: `upsert`). The full-text feed of its new
        rows runs last, or, given `finishing`, is appended to it for the finisher."""
        result = UpsertResult()
        postgres = self.store.engine == "postgresql"
        if postgres:   # COPY + one insert, the rest merged; a refused batch goes on row by row below
            from basecrawler.store.engines.pg_upsert import merge_batch
            if merge_batch(db, plan, rows, result):
                return result
            # Concurrent writers lock rows in one order (by key), so they queue, never deadlock.
            rows = sorted(rows, key=plan.key)
        key, lookup = plan.key, self.store.lookup
        d = dialect_of(self.store)
        # Every row this batch inserts gets an id above today's largest (INTEGER PRIMARY KEY
        # without AUTOINCREMENT takes max + 1), so `id > last_id` is exactly the new rows; and
        # a table without a row (a first import's first batch) has no stored row to look up.
        last_id = (None if postgres else
                   db.conn.execute(SQLITE.query(f"SELECT COALESCE(MAX(id), 0) FROM {d.quote(plan.table)}")).fetchone()[0])
        if last_id == 0 or (unstored and not postgres):
            stored = {}
        else:
            # First only each stored row's input hash (a re-run of the same input needs nothing
            # more); the whole stored rows only for the keys whose input differs. (PostgreSQL:
            # the rows are locked until the batch commits, so no other writer changes them
            # between the verdict and the write.)
            hashes = lookup.rows_by_key(plan.record_type, (key(r) for r in rows), ("id", INPUT_HASH), lock=postgres)
            differing = [k for r in rows if (k := key(r)) in hashes and hashes[k][INPUT_HASH] != r[INPUT_HASH]]
            stored = {**hashes, **(lookup.rows_by_key(plan.record_type, differing, ("id", INPUT_HASH, *plan.written))
                                   if differing else {})}
        now = now or utc_now_iso()
        feed = self.fts_feed(plan.record_type)
        new_rows, changed, rehashed = _judge(plan, rows, stored, result)
        # New rows by a plain INSERT (SQLite: no other writer can add their keys since the
        # lookup, BEGIN IMMEDIATE), changed ones by the update of the merged row; each group at
        # once, or bisected when a first attempt was refused (always, on PostgreSQL: only a
        # batch the server refused comes here).
        write = self.write_bisecting if bisect or postgres else self._write_at_once

        if write == self._write_at_once:   # every new row written, or _BatchRefused: counted at once
            inserted = self._insert_at_once(db, plan, new_rows, now)
            result.new += len(inserted)
            result.by_key.update(zip(map(key, map(_ROW, inserted)), itertools.repeat(NEW)))
            inserted = ()
        else:
            inserted = write(db, plan, new_rows, now, plan.insert_sql_for(d), plan.params_ahead)
        written = itertools.chain(inserted, write(db, plan, changed, now, plan.update_sql_for(d), plan.update_params))
        taken: list[tuple[dict, str]] = []
        for row, outcome in written:
            if outcome in (NEW, UPDATED):
                setattr(result, outcome, getattr(result, outcome) + 1)
                result.by_key[key(row)] = outcome
            elif postgres and outcome.startswith("UniqueViolation"):
                taken.append((row, outcome))   # (an update never changes a key: this was an insert)
            else:
                result.failed.append((row, outcome))
        if taken:
            rehashed += self._merge_taken(db, plan, taken, now, result)
        if rehashed:   # bookkeeping only: updated_at and the counts stay as they are
            db.conn.executemany(d.write(f"UPDATE {d.quote(plan.table)} SET {d.quote(INPUT_HASH)} = {d.p} "
                                        f"WHERE id = {d.p}"), rehashed)
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
        stored = self.store.lookup.rows_by_key(plan.record_type, [key(row) for row, _ in taken],
                                               ("id", INPUT_HASH, *plan.written), lock=True)
        errors = {id(row): error for row, error in taken}
        gone, changed, rehashed = _judge(plan, [row for row, _ in taken], stored, result)
        result.failed += [(row, errors[id(row)]) for row, _ in gone]   # gone again: the insert's refusal stands
        for row, outcome in self.write_bisecting(db, plan, changed, now, plan.update_sql_for(dialect_of(self.store)),
                                                 plan.update_params):
            if outcome == UPDATED:
                result.updated += 1
                result.by_key[key(row)] = UPDATED
            else:
                result.failed.append((row, outcome))
        return rehashed

    def _write_at_once(self, db, plan: UpsertPlan, items: list[tuple[dict, str]], now: str, sql: str, params_of):
        """Write items with one statement and no savepoint (a savepoint costs SQLite a
        sub-journal of every page the batch touches); a refused row raises `_BatchRefused`,
        and the caller rolls the transaction back and writes the batch bisected."""
        if not items:
            return []
        try:
            db.conn.executemany(sql, [params_of(row, now) for row, _ in items])
        except (*self.refused, TypeError, ValueError, OverflowError) as exc:  # a refused or unbindable row
            if not refused_row(db.conn, exc):
                raise
            raise _BatchRefused() from exc
        return items

    def _insert_at_once(self, db, plan: UpsertPlan, items: list[tuple[dict, str]], now: str):
        """New SQLite rows as `_write_at_once` writes them, but many rows a statement
        (`plan.insert_rows_sql_for`): one statement's step and binding for `ROWS_PER_INSERT`
        rows costs SQLite and the module less than as many steps of `executemany`. The counts
        come in fixed sizes (the full one, then halves down to `FEWEST_ROWS_PER_INSERT`, the
        last few rows by `executemany`), so a connection caches a handful of statements, not one
        per batch size. A refused row stops its statement and keeps the rows before it (OR
        FAIL: no statement journal), so a failure here always ends the whole transaction
        (`_BatchRefused`, or any other error raised out of it)."""
        if not items:
            return []
        width = plan.insert_width
        per = min(ROWS_PER_INSERT, _variable_limit(db.conn) // width)
        if per < FEWEST_ROWS_PER_INSERT:
            return self._write_at_once(db, plan, items, now, plan.insert_sql_for(SQLITE), plan.params_ahead)
        params = [plan.params_ahead(row, now) for row, _ in items]
        try:
            start, left = 0, len(params)
            while left >= FEWEST_ROWS_PER_INSERT:
                count = per
                while count > left:
                    count //= 2
                db.conn.execute(plan.insert_rows_sql_for(SQLITE, count),
                                list(itertools.chain.from_iterable(params[start:start + count])))
                start, left = start + count, left - count
            if left:
                db.conn.executemany(plan.insert_sql_for(SQLITE), params[start:])
        except (*self.refused, TypeError, ValueError, OverflowError) as exc:  # a refused or unbindable row
            if not refused_row(db.conn, exc):
                raise
            raise _BatchRefused() from exc
        return items

    def write_bisecting(self, db, plan: UpsertPlan, items: list[tuple[dict, str]], now: str, sql: str, params_of):
        """Write items inside a savepoint; on failure split in halves until the bad rows are
        alone. Yields (row, outcome) with outcome 'new' / 'updated' or the error text."""
        if not items:
            return
        d = dialect_of(self.store)
        db.conn.execute(d.write(f"SAVEPOINT {_SAVEPOINT}"))
        try:
            db.conn.executemany(sql, [params_of(row, now) for row, _ in items])
        except (*self.refused, TypeError, ValueError, OverflowError) as exc:  # a refused or unbindable row
            if self.store.engine == "sqlite" and not refused_row(db.conn, exc):
                raise   # (the transaction, savepoint and all, is rolled back by the caller or was already)
            db.conn.execute(d.write(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}"))
            db.conn.execute(d.write(f"RELEASE SAVEPOINT {_SAVEPOINT}"))
            if is_locked_error(exc):
                raise
            if len(items) == 1:
                yield items[0][0], f"{type(exc).__name__}: {exc}"
                return
            middle = len(items) // 2
            yield from self.write_bisecting(db, plan, items[:middle], now, sql, params_of)
            yield from self.write_bisecting(db, plan, items[middle:], now, sql, params_of)
            return
        db.conn.execute(d.write(f"RELEASE SAVEPOINT {_SAVEPOINT}"))
        yield from items


# New rows a SQLite INSERT statement holds at most (and, halving, at least; fewer go by
# executemany). Measured per row against executemany: bench/README.md, w12-write.
ROWS_PER_INSERT, FEWEST_ROWS_PER_INSERT = 512, 16


def _variable_limit(conn) -> int:
    """How many parameters one statement may bind (SQLite's default before 3.32 was 999)."""
    try:
        return conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    except AttributeError:   # (Python before 3.11 cannot ask)
        return 999


def _judge(plan: UpsertPlan, rows: list[dict], stored: dict, result: UpsertResult
           ) -> tuple[list[tuple[dict, str]], list[tuple[dict, str]], list[tuple[str, int]]]:
    """The one merge rule over a batch against its stored rows: (new rows, merged rows to
    update, (input hash, id) to repoint); unchanged rows are counted here, so what is written
    is what is counted."""
    if not stored:   # no stored row at all: `decide`'s first case, for every row
        return [(row, NEW) for row in rows], [], []
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


__all__ = ["Records", "UpsertResult"]
