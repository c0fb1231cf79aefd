"""The PostgreSQL upsert of a batch: `COPY` into a temporary staging table, then one merge
statement that applies the COALESCE rule of basecrawler/recordtypes/upsert.py in the server and
returns which keys it inserted or updated (issue #23).

The same rules as the row-by-row path (`Store._upsert_batch`), generated from the type's
declaration (`UpsertPlan`), never from a named type or field:
- a NULL never erases a stored value (COALESCE); inside `extra`, the objects merge key by key
  and blank values (null, "", [], {}) of the incoming one are dropped;
- an unknown date never replaces a known one (the `date_unknown` flag);
- a changed `X_original` clears `X_ko` and the translation state;
- a row is written only when a merged value differs from the stored one and its `input_hash`
  differs from the stored hash: `input_hash` and `updated_at` move only on a real change,
  `first_seen_at` is set on insert. Keys the statement does not return were unchanged.
- rows are merged in key order (byte order, as Python sorts the fallback path's rows), so
  concurrent writers lock rows in one order and queue instead of deadlocking.

A changed `extra` is written as Python writes it (`json.dumps(sort_keys=True)`): the keys
sorted by code point, each value's own JSON text kept from the stored or the incoming object
(`json_each` on `json`, not `jsonb`, keeps the text), so both engines and both paths store the
same text.

Derived columns (a normalised maker key) are computed in Python from the incoming row
(`UpsertPlan.params`) and COALESCEd like any column: a derived value that depends on several
columns of which the incoming row lacks some would be computed without them (the row-by-row
path computes it from the merged row); today's declarations derive from one column.

Any refusal of the batch for a reason of its data (a check constraint, a value too long or out
of range, text with NUL, a value psycopg cannot send, JSON the server cannot read) rolls the
batch back to its savepoint and `merge_batch` returns False: the store then runs the row-by-row
path, whose bisection makes exactly the bad rows failures. A lost connection, a deadlock or a
serialisation failure is raised as from any statement of engines/pg.py: the store's retry runs
the whole transaction again.
"""
from __future__ import annotations

import functools
import hashlib
import logging
from typing import Iterable

import psycopg
from psycopg.adapt import Dumper
from psycopg.postgres import types as pg_types

from basecrawler.formats.dates import utc_now_iso
from basecrawler.recordtypes.declaration import DATE_UNKNOWN
from basecrawler.recordtypes.upsert import EXTRA, GIVEN_HASH, INPUT_HASH, UpsertPlan
from basecrawler.store.engines.pg import is_connection_lost, is_retryable

log = logging.getLogger(__name__)

SAVEPOINT = "pg_merge_batch"
# Blank values inside `extra`, as Python's json.dumps writes them (None, "", [], {}).
_BLANK_JSON = "('null', '\"\"', '[]', '{}')"


class _BoolAsInt(Dumper):
    """Booleans as 0/1, as the store keeps them (engines/pg.py `_bind` does so for parameters)."""

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
        self.copy = f"COPY {self.stage} ({cols}) FROM STDIN"
        # An unchanged row pointed at the input it was seen with this time (bookkeeping only, as
        # the row-by-row path does), in the store's dialect (engines/pg.py translates it).
        self.rehash = (f"UPDATE [{plan.table}] SET [{INPUT_HASH}] = ? WHERE "
                       + " AND ".join(f"[{c}] = ?" for c in plan.key_columns)
                       + f" AND ([{INPUT_HASH}] IS NULL OR [{INPUT_HASH}] <> ?)")
        keys = ", ".join(map(_q, plan.key_columns))
        # Text keys in byte order (COLLATE "C"): the code-point order Python sorts the fallback path's rows in.
        order = ", ".join(_q(c) + (' COLLATE "C"' if rt.column_types.get(c, str) is str else "")
                          for c in plan.key_columns)
        sets, changes = self._assignments(plan)
        # The staging table is emptied by COMMIT (ON COMMIT DELETE ROWS); a second batch in one
        # transaction empties it first (`merge_batch`).
        self.merge = (f"INSERT INTO {_q(plan.table)} AS t ({cols}) SELECT {cols} FROM {self.stage} ORDER BY {order} "
                      f"ON CONFLICT ({keys}) DO UPDATE SET {', '.join(sets)} "
                      f"WHERE t.{INPUT_HASH} IS DISTINCT FROM excluded.{INPUT_HASH} AND ({' OR '.join(changes) or 'FALSE'}) "
                      f"RETURNING {', '.join(f't.{_q(c)}' for c in plan.key_columns)}, (t.xmax = 0)")
        # The merge and the savepoint's release in one message (one round trip): the release
        # does not run when the merge fails, and the savepoint is there to roll back to.
        self.merge_release = f"{self.merge}; RELEASE SAVEPOINT {SAVEPOINT}"

    @staticmethod
    def _assignments(plan: UpsertPlan) -> tuple[list[str], list[str]]:
        """(SET assignments, predicates of which any means the merged row differs from the stored one)."""
        rt = plan.record_type
        sets, changes = [], []
        for col in plan.data_columns:
            if col in plan.key_columns:
                continue
            c = _q(col)
            if plan.dated and col in (plan.date_field, DATE_UNKNOWN):
                # An unknown date never replaces a known one (a stored flag NULL counts as known, as in `merge`).
                keep = f"excluded.{DATE_UNKNOWN} = 1 AND COALESCE(t.{DATE_UNKNOWN}, 0) = 0"
                merged = f"CASE WHEN {keep} THEN t.{c} ELSE excluded.{c} END"
                changed = (f"COALESCE({merged}, 0) IS DISTINCT FROM COALESCE(t.{c}, 0)" if col == DATE_UNKNOWN
                           else f"{merged} IS DISTINCT FROM t.{c}")
            elif col == EXTRA and plan.has_extra:
                changed = _extra_changed(f"excluded.{c}", f"t.{c}")
                merged = f"CASE WHEN {changed} THEN {_extra_merged(f'excluded.{c}', f't.{c}')} ELSE t.{c} END"
            else:
                merged = f"COALESCE(excluded.{c}, t.{c})"
                changed = f"(excluded.{c} IS NOT NULL AND excluded.{c} IS DISTINCT FROM t.{c})"
            sets.append(f"{c} = {merged}")
            if col in plan.compared:
                changes.append(f"({changed})")
        originals = [f"(excluded.{_q(o)} IS NOT NULL AND excluded.{_q(o)} IS DISTINCT FROM t.{_q(o)})"
                     for o in rt.original_columns]
        for original, korean in zip(originals, rt.korean_columns):
            sets.append(f"{_q(korean)} = CASE WHEN {original} THEN NULL ELSE t.{_q(korean)} END")
        if originals:
            any_changed = " OR ".join(originals)
            for col in ("translated_at", "translation_status", "translation_note"):
                sets.append(f"{col} = CASE WHEN {any_changed} THEN NULL ELSE t.{col} END")
        sets += [f"{INPUT_HASH} = excluded.{INPUT_HASH}", "updated_at = excluded.updated_at"]
        return sets, changes


def _incoming(new: str) -> str:
    """The incoming object's non-blank pairs (a FROM item aliased `i`)."""
    return f"json_each({new}::json) AS i WHERE i.value::text NOT IN {_BLANK_JSON}"


def _extra_changed(new: str, old: str) -> str:
    """Whether a non-blank incoming pair is missing from the stored object or has another value
    there (compared as jsonb: 1 and 1.0 are one number, as in Python)."""
    return f"EXISTS (SELECT 1 FROM {_incoming(new)} AND ({old}::jsonb -> i.key) IS DISTINCT FROM i.value::jsonb)"


def _extra_merged(new: str, old: str) -> str:
    """The stored object with the incoming non-blank pairs laid over it, as the text Python's
    `json.dumps(…, ensure_ascii=False, sort_keys=True)` gives (values keep their JSON text)."""
    return ("(SELECT '{' || string_agg(to_json(p.k)::text || ': ' || p.v, ', ' ORDER BY p.k COLLATE \"C\") || '}' "
            f"FROM (SELECT o.key AS k, o.value::text AS v FROM json_each({old}::json) AS o "
            f"WHERE NOT EXISTS (SELECT 1 FROM {_incoming(new)} AND i.key = o.key) "
            f"UNION ALL SELECT i.key, i.value::text FROM {_incoming(new)}) AS p)")


@functools.lru_cache(maxsize=None)
def merge_sql(plan: UpsertPlan) -> MergeSql:
    return MergeSql(plan)


def merge_batch(db, plan: UpsertPlan, rows: list[dict], result, *, _again: bool = False) -> bool:
    """Upsert `rows` (folded: one per key, `input_hash` set) through COPY and one merge
    statement, counting each key into `result` (an UpsertResult). False, with nothing written,
    when the server refused the batch for its data: the caller's row-by-row path then finds the
    refused rows.

    As few round trips as the plain COPY + merge: the COPY and the merge (besides the caller's
    BEGIN and COMMIT). A batch that opens its transaction needs no savepoint (a refusal rolls
    the transaction back and begins it again, which leaves what a savepoint would); one after
    other statements sends its savepoint with the staging table's preparation and releases it
    with the merge. The staging table is made once per connection (`PgConnection.session`
    remembers it); one made in a transaction that was rolled back since is gone, which the COPY
    finds out: then it is made again and the batch sent once more."""
    if not rows:
        return True
    sql = merge_sql(plan)
    now = utc_now_iso()
    conn = db.conn
    stages = conn.session.setdefault(__name__, {})   # staging table → the transaction that last filled it
    filled_in = stages.get(sql.stage)
    savepoint = conn.statements_in_transaction > 0
    head = [f"SAVEPOINT {SAVEPOINT}"] if savepoint else []
    if filled_in is None:
        head.append(sql.create)
    elif filled_in == conn.transactions:   # an earlier batch of this transaction left its rows there
        head.append(f"DELETE FROM {sql.stage}")
    merge = sql.merge_release if savepoint else sql.merge
    try:
        if head:
            first = "; ".join(head)
            conn.run_statement(first, lambda raw: raw.execute(first))
        stages[sql.stage] = conn.transactions
        values = plan.params   # (the written columns read with one itemgetter: recordtypes/upsert.py)
        conn.run_statement(sql.copy, lambda raw: _copy(raw, sql.copy, (values(row, now) for row in rows)))
        # The lone merge is prepared by psycopg after a few batches (parsed and planned once per
        # connection); the merge with the release is two statements, which cannot be.
        written = conn.run_statement(merge, lambda raw: raw.execute(merge, prepare=False if savepoint else None).fetchall())
    except (psycopg.Error, TypeError, ValueError, OverflowError) as exc:
        if is_connection_lost(exc) or is_retryable(exc):
            raise   # the store's retry runs the transaction again (engines/pg.py)
        stages.pop(sql.stage, None)   # the rollback may undo its CREATE: made again (IF NOT EXISTS) next time
        if savepoint:
            conn.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
            conn.execute(f"RELEASE SAVEPOINT {SAVEPOINT}")
        else:
            conn.execute("ROLLBACK")
            conn.execute("BEGIN")
        if isinstance(exc, psycopg.errors.UndefinedTable) and not _again:
            # The staging table was made in a transaction rolled back since (a retried deadlock).
            return merge_batch(db, plan, rows, result, _again=True)
        log.debug("%s: batch of %d refused by the merge (%s: %s); writing it row by row", plan.table, len(rows),
                  type(exc).__name__, str(exc).split("\n")[0])
        return False
    key = plan.key
    outcomes = dict.fromkeys(map(key, rows), "unchanged")
    for *key_values, inserted in written:
        outcomes[tuple(key_values)] = "new" if inserted else "updated"
    if len(outcomes) != len(rows):   # a returned key that is no row's (a key value stored as another type)
        raise RuntimeError(f"{plan.table}: the merge returned keys the batch does not have")
    new = sum(1 for row in written if row[-1])
    result.new += new
    result.updated += len(written) - new
    result.unchanged += len(rows) - len(written)
    result.by_key.update(outcomes)
    # In key order, as the merge locks rows: concurrent writers queue instead of deadlocking.
    rehash = sorted(([row[INPUT_HASH], *key(row), row[INPUT_HASH]] for row in rows
                     if row.get(GIVEN_HASH) and outcomes[key(row)] == "unchanged"), key=lambda r: r[1:-1])
    if rehash:   # so the next run recognises these rows unvalidated (pipeline/intake.py)
        conn.executemany(sql.rehash, rehash)
    return True


def _copy(raw: psycopg.Connection, statement: str, params: Iterable[list]) -> None:
    """COPY the rows' values, each computed as the one before it travels: the server reads the
    stream while the client prepares the rest."""
    cursor = raw.cursor()
    cursor.adapters.register_dumper(bool, _BoolAsInt)
    with cursor.copy(statement) as copy:
        for values in params:
            copy.write_row(values)


__all__ = ["merge_batch", "merge_sql", "MergeSql"]
