"""The PostgreSQL write of a batch (issues #23, #35 item 8): the batch's keys looked up, the new
ones `COPY`ed straight into the table (a first import costs the server what any writer of the rows
must); a key another writer inserted meanwhile makes that COPY fail whole, and the batch goes the
staged way: `COPY` into a temporary staging table and one `INSERT … ON CONFLICT DO NOTHING
RETURNING`. The keys a row already holds are judged by the type's one merge rule
(`UpsertPlan.decide`, basecrawler/recordtypes/upsert.py): those made from the very same input
(`input_hash`) are unchanged at once, the others are read whole and locked (`FOR UPDATE`), and the
changed ones written as the rule made them (`UpsertPlan.update_sql_for`). The server decides
nothing about a row's values: what is stored and what is counted come from the same verdict, as
on SQLite (store/records.py).

- A key is new only when this batch inserted it (the COPY of keys no row held, or RETURNING): one
  another writer inserted meanwhile is found by the conflict and merged like any stored row.
- Rows are inserted, locked and updated in key order (byte order, as Python sorts them), so
  concurrent writers queue instead of deadlocking.

Any refusal of the batch for a reason of its data (a check constraint, a value too long or out
of range, text with NUL, a value psycopg cannot send) rolls the batch back to its savepoint and
`merge_batch` returns False: the store then runs the row-by-row path, whose bisection makes
exactly the bad rows failures. A lost connection, a deadlock or a serialisation failure is
raised as from any statement of engines/pg.py: the store's retry runs the whole transaction again.
"""
from __future__ import annotations

import functools
import hashlib
import logging
from typing import Iterable

import psycopg
from psycopg.adapt import Dumper
from psycopg.postgres import types as pg_types

from basecrawler.errors import CrawlerError
from basecrawler.formats.dates import utc_now_iso
from basecrawler.recordtypes.upsert import GIVEN_HASH, INPUT_HASH, NEW, UNCHANGED, UpsertPlan
from basecrawler.store.engines.dialect import POSTGRES
from basecrawler.store.engines.pg import is_connection_lost, is_retryable

log = logging.getLogger(__name__)

SAVEPOINT = "pg_merge_batch"
_SAVEPOINT = POSTGRES.write(f"SAVEPOINT {SAVEPOINT}")
_RELEASE = POSTGRES.write(f"RELEASE SAVEPOINT {SAVEPOINT}")
_ROLLBACK_TO = POSTGRES.write(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")


class _BoolAsInt(Dumper):
    """Booleans as 0/1, as the store keeps them (engines/pg_cursor.py `bind` does so for parameters)."""

    oid = pg_types["int8"].oid

    def dump(self, obj: bool) -> bytes:
        return b"1" if obj else b"0"


def _q(name: str) -> str:
    return f'"{name}"'


class MergeSql:
    """The statements of one type's batch merge, generated once per plan."""

    def __init__(self, plan: UpsertPlan):
        rt = plan.record_type
        self.plan = plan
        self.columns = [*plan.written, *plan.derived, INPUT_HASH, "first_seen_at", "updated_at"]   # `params` order
        cols = ", ".join(map(_q, self.columns))
        digest = hashlib.blake2b(f"{plan.table}:{cols}".encode(), digest_size=6).hexdigest()
        self.stage = f"bc_stage_{digest}"   # per table and column list: a type that grew a column gets a new one
        self.create = (f"CREATE TEMP TABLE IF NOT EXISTS {self.stage} ON COMMIT DELETE ROWS AS "
                       f"SELECT {cols} FROM {_q(plan.table)} WITH NO DATA")
        self.copy = POSTGRES.write(f"COPY {self.stage} ({cols}) FROM STDIN")
        # The keys no stored row holds go straight into the table (`merge_batch`).
        self.copy_direct = POSTGRES.write(f"COPY {_q(plan.table)} ({cols}) FROM STDIN")
        # An unchanged row pointed at the input it was seen with this time (bookkeeping only).
        self.rehash = POSTGRES.write(f"UPDATE {_q(plan.table)} SET {_q(INPUT_HASH)} = %s WHERE id = %s")
        keys = ", ".join(map(_q, plan.key_columns))
        # Text keys in byte order (COLLATE "C"): the code-point order Python sorts rows in.
        order = ", ".join(_q(c) + (' COLLATE "C"' if rt.column_types.get(c, str) is str else "")
                          for c in plan.key_columns)
        # The staging table is emptied by COMMIT (ON COMMIT DELETE ROWS); a second batch in one
        # transaction empties it first (`merge_batch`).
        self.insert = POSTGRES.write(f"INSERT INTO {_q(plan.table)} ({cols}) SELECT {cols} FROM {self.stage} ORDER BY {order} "
                       f"ON CONFLICT ({keys}) DO NOTHING RETURNING {keys}")
        # The stored rows of the keys the insert left, as `decide` needs them.
        self.stored_columns = ("id", INPUT_HASH, *plan.written)


@functools.lru_cache(maxsize=None)
def merge_sql(plan: UpsertPlan) -> MergeSql:
    return MergeSql(plan)


def merge_batch(db, plan: UpsertPlan, rows: list[dict], result, *, _again: bool = False,
                _staged: bool = False) -> bool:
    """Write `rows` (folded: one per key, `input_hash` set), counting each key into `result`
    (an UpsertResult). False, with nothing written, when the server refused the batch for its
    data: the caller's row-by-row path then finds the refused rows.

    First the batch's keys are looked up (their input hashes, unlocked); the keys not found
    are COPYed straight into the table, so a first import costs the server what any writer of
    these rows must (no staging table, no second insert). A key another writer inserted since
    the lookup makes that COPY fail whole (a unique violation): the batch is then written again
    the staged way (`_staged`), where `INSERT … ON CONFLICT DO NOTHING RETURNING` says which
    keys this statement inserted. Either way a key is counted new only when this batch
    inserted it, and a held key is judged by `UpsertPlan.decide`.

    A batch that opens its transaction needs no savepoint (a refusal rolls the transaction back
    and begins it again, which leaves what a savepoint would); one after other statements sends
    its savepoint first. The staging table is made once per connection (`PgConnection.session`
    remembers it); one made in a transaction that was rolled back since is gone, which the COPY
    finds out: then it is made again and the batch sent once more."""
    if not rows:
        return True
    from basecrawler.store.engines.pg_lookup import rows_by_key, values_by_key   # (pg_lookup imports nothing of the store)
    sql = merge_sql(plan)
    now = utc_now_iso()
    conn = db.conn
    stages = conn.session.setdefault(__name__, {})   # staging table → the transaction that last filled it
    savepoint = conn.statements_in_transaction > 0
    key = plan.key
    rows = sorted(rows, key=key)   # key order: concurrent writers lock rows in one order
    outcomes: dict[tuple, str] = {}
    values = plan.params   # (the written columns read with one itemgetter: recordtypes/upsert.py)
    try:
        if _staged:
            head = [f"SAVEPOINT {SAVEPOINT}"] if savepoint else []
            filled_in = stages.get(sql.stage)
            if filled_in is None:
                head.append(sql.create)
            elif filled_in == conn.transactions:   # an earlier batch of this transaction left its rows there
                head.append(f"DELETE FROM {sql.stage}")
            if head:
                first = POSTGRES.write("; ".join(head))
                conn.run_statement(first, lambda raw: raw.execute(first), read_only=False)
            stages[sql.stage] = conn.transactions
            conn.run_statement(sql.copy, lambda raw: _copy(raw, sql.copy, (values(row, now) for row in rows)),
                               read_only=False)
            # The lone insert is prepared by psycopg after a few batches (parsed and planned once per connection).
            inserted = conn.run_statement(sql.insert, lambda raw: raw.execute(sql.insert).fetchall(), read_only=False)
            outcomes.update((tuple(k), NEW) for k in inserted)
            if not outcomes.keys() <= set(map(key, rows)):   # a key value stored as another type
                raise RuntimeError(f"{plan.table}: the insert returned keys the batch does not have")
            rest = [row for row in rows if key(row) not in outcomes]
            # First only the held rows' input hashes: a row made from this very input is
            # unchanged (merging it changes nothing), without a lock; the others are read
            # whole and locked.
            hashes = values_by_key(conn, plan.record_type, map(key, rest), (INPUT_HASH,)) if rest else {}
        else:
            if savepoint:
                conn.execute(_SAVEPOINT)
            hashes = values_by_key(conn, plan.record_type, map(key, rows), (INPUT_HASH,))
            new = [row for row in rows if key(row) not in hashes] if hashes else rows
            if new:
                conn.run_statement(sql.copy_direct, lambda raw: _copy(raw, sql.copy_direct,
                                                                      (values(row, now) for row in new)),
                                   read_only=False)
                outcomes.update((key(row), NEW) for row in new)
            rest = [row for row in rows if key(row) in hashes] if hashes else []
        for row in rest:
            if hashes.get(key(row), (None,))[0] == row[INPUT_HASH]:
                outcomes[key(row)] = UNCHANGED
        rest = [row for row in rest if key(row) not in outcomes]
        stored = rows_by_key(conn, plan.record_type, map(key, rest), sql.stored_columns, lock=True) if rest else {}
        updates, rehash = [], []
        for row in rest:
            old = stored.get(key(row))
            if old is None:   # held by a row that is gone again (deleted meanwhile): let the row-by-row path see
                raise _Vanished()
            outcome, merged = plan.decide(old, row)
            outcomes[key(row)] = outcome
            if merged is not None:
                updates.append(plan.update_params(merged, now))
            elif row.get(GIVEN_HASH) and old[INPUT_HASH] != row[INPUT_HASH]:
                # so the next run recognises this row unvalidated (pipeline/intake.py)
                rehash.append([row[INPUT_HASH], old["id"]])
        if updates:
            conn.executemany(plan.update_sql_for(POSTGRES), updates)
        if rehash:
            conn.executemany(sql.rehash, rehash)
        if savepoint:
            conn.execute(_RELEASE)
    except (psycopg.Error, TypeError, ValueError, OverflowError, _Vanished) as exc:
        if is_connection_lost(exc) or is_retryable(exc):
            raise   # the store's retry runs the transaction again (engines/pg.py)
        stages.pop(sql.stage, None)   # the rollback may undo its CREATE: made again (IF NOT EXISTS) next time
        if savepoint:
            conn.execute(_ROLLBACK_TO)
            conn.execute(_RELEASE)
        else:
            conn.execute(POSTGRES.write("ROLLBACK"))
            conn.execute(POSTGRES.write(POSTGRES.begin))
        if isinstance(exc, psycopg.errors.UniqueViolation) and not _staged:
            # Another writer inserted one of the keys since the lookup: the staged way finds which.
            return merge_batch(db, plan, rows, result, _again=_again, _staged=True)
        if isinstance(exc, psycopg.errors.UndefinedTable) and _staged and not _again:
            # The staging table was made in a transaction rolled back since (a retried deadlock).
            return merge_batch(db, plan, rows, result, _again=True, _staged=True)
        log.debug("%s: batch of %d refused (%s: %s); writing it row by row", plan.table, len(rows),
                  type(exc).__name__, str(exc).split("\n")[0])
        return False
    for outcome in outcomes.values():
        setattr(result, outcome, getattr(result, outcome) + 1)
    result.by_key.update(outcomes)
    return True


class _Vanished(CrawlerError):
    """A key the insert found taken has no row by the time it is read (deleted meanwhile)."""
    kind = "row_vanished"


def _copy(raw: psycopg.Connection, statement: str, params: Iterable[list]) -> None:
    """COPY the rows' values, each computed as the one before it travels: the server reads the
    stream while the client prepares the rest."""
    cursor = raw.cursor()
    cursor.adapters.register_dumper(bool, _BoolAsInt)
    with cursor.copy(statement) as copy:
        for values in params:
            copy.write_row(values)


__all__ = ["merge_batch", "merge_sql", "MergeSql"]
