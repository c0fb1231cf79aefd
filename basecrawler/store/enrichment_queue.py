"""The `enrichment` table: one row per record that still needs its detail, with its rung on the
ladder (the rules are basecrawler/pipeline/enrichment.py's, the statements here). Reached as
`store.enrichment`; each statement is spelled with the store's dialect. Times are the caller's fixed-width
UTC text (`enrichment.timestamp`), so they compare as strings; the states are the caller's too.
"""
from __future__ import annotations

from typing import Iterable

from basecrawler.store.engines.dialect import dialect_of


class EnrichmentQueue:
    """The enrichment queue of one store (its `write` and `query`)."""

    def __init__(self, store):
        self.store = store

    def enqueue(self, source: str, wanted: Iterable[tuple[str, str, str | None]], *, state: str, now: str) -> int:
        """Queue (key_prefix, record_key, record_date) items in `state`, due `now`; returns how
        many were new. A queued item keeps its state; only its record_date follows the list
        (the claim order)."""
        wanted = list(wanted)
        d = dialect_of(self.store)
        insert = d.write(
            "INSERT INTO enrichment (source, key_prefix, record_key, record_date, state, level, attempts, "
            f"transient_failures, next_attempt_at, created_at, updated_at) VALUES ({d.params(5)}, 0, 0, 0, "
            f"{d.params(3)}) ON CONFLICT(source, key_prefix, record_key) DO NOTHING")
        follow = d.write(
            f"UPDATE enrichment SET record_date = {d.p} WHERE source = {d.p} AND key_prefix = {d.p} "
            f"AND record_key = {d.p} AND record_date {d.is_not} {d.p}")

        def op(db):
            inserted = 0
            for prefix, number, date in wanted:
                cursor = db.conn.execute(insert, [source, prefix, number, date, state, now, now, now])
                inserted += cursor.rowcount
                db.conn.execute(follow, [date, source, prefix, number, date])
            return inserted
        return self.store.write(op) if wanted else 0

    def requeue(self, source: str, *, state: str, to: str, now: str) -> int:
        """Every item of the source in `state` back to `to` at level 0, due now."""
        d = dialect_of(self.store)
        return self.store.write(lambda db: db.conn.execute(d.write(
            f"UPDATE enrichment SET state = {d.p}, level = 0, next_attempt_at = {d.p}, claimed_at = NULL, "
            f"updated_at = {d.p} WHERE source = {d.p} AND state = {d.p}"), [to, now, now, source, state]).rowcount)

    def reclaim(self, source: str, *, claimed: str, claimed_before: str, retry: str, pending: str,
                now: str) -> list[str]:
        """Items `claimed` before `claimed_before` back at their level (`retry` above level 0,
        else `pending`), due now; returns their record keys."""
        d = dialect_of(self.store)
        return self.store.write(lambda db: [
            r[0] for r in db.conn.execute(d.write(
                f"UPDATE enrichment SET state = CASE WHEN level > 0 THEN {d.p} ELSE {d.p} END, claimed_at = NULL, "
                f"next_attempt_at = {d.p}, updated_at = {d.p} WHERE source = {d.p} AND state = {d.p} "
                f"AND claimed_at < {d.p} RETURNING record_key"),
                [retry, pending, now, now, source, claimed, claimed_before]).fetchall()
        ])

    def claim(self, source: str, *, due: Iterable[str], claimed: str, now: str, limit: int) -> list[dict]:
        """Mark up to `limit` items in a `due` state whose time has come as `claimed` (newest
        record first) and return them. One write transaction, so two claimers never take the
        same item; on PostgreSQL concurrent claimers skip each other's rows."""
        due = list(due)
        if limit <= 0:
            return []

        d = dialect_of(self.store)

        def op(db):
            # A write: it locks the rows it takes (FOR UPDATE on PostgreSQL).
            cursor = db.conn.execute(d.write(
                f"SELECT * FROM enrichment WHERE source = {d.p} AND state IN ({d.params(len(due))}) "
                f"AND next_attempt_at <= {d.p} ORDER BY record_date DESC, id LIMIT {d.p}{self.store.skip_locked}"),
                [source, *due, now, limit])
            names = [column[0] for column in cursor.description]
            items = [dict(zip(names, values)) for values in cursor.fetchall()]
            db.conn.executemany(d.write(
                f"UPDATE enrichment SET state = {d.p}, claimed_at = {d.p}, updated_at = {d.p} WHERE id = {d.p}"),
                [[claimed, now, now, item["id"]] for item in items],
            )
            return items
        return self.store.write(op)

    def release(self, item_id: int, *, state: str, due: str, now: str, attempted: bool, error: str | None) -> None:
        """An item back to `state` at its own level, due at `due`; an attempt is counted when
        `attempted`, a transient failure when it also has an `error` (kept as its last)."""
        d = dialect_of(self.store)
        self.store.write(lambda db: db.conn.execute(d.write(
            f"UPDATE enrichment SET state = {d.p}, claimed_at = NULL, next_attempt_at = {d.p}, updated_at = {d.p}, "
            f"attempts = attempts + {d.p}, transient_failures = transient_failures + {d.p}, "
            f"last_error = COALESCE({d.p}, last_error) WHERE id = {d.p}"),
            [state, due, now, int(attempted), int(attempted and error is not None), error, item_id]))

    def settle(self, source: str, item: dict, *, state: str, level: int, due: str | None, now: str, attempted: bool,
               error: str | None, resolve_letters: bool) -> None:
        """An item to `state` at `level` (due at `due`, None: never); `resolve_letters`: its
        record's detail dead letters are resolved in the same transaction."""
        d = dialect_of(self.store)

        def op(db):
            db.conn.execute(d.write(
                f"UPDATE enrichment SET state = {d.p}, level = {d.p}, claimed_at = NULL, next_attempt_at = {d.p}, "
                f"updated_at = {d.p}, attempts = attempts + {d.p}, last_error = {d.p} WHERE id = {d.p}"),
                [state, level, due, now, int(attempted), error, item["id"]])
            if resolve_letters:
                self.store.dead_letters.resolve_detail(db, source, item["record_key"], at=now)
        self.store.write(op)

    def counts(self, source: str) -> dict[str, int]:
        """Items by state, `retry` per level (retry1 … retry4: how close to `gone`)."""
        d = dialect_of(self.store)
        return {row["state"]: row["n"] for row in self.store.query(d.query(
            "SELECT CASE WHEN state = 'retry' THEN 'retry' || level ELSE state END AS state, COUNT(*) AS n "
            f"FROM enrichment WHERE source = {d.p} GROUP BY 1 ORDER BY 1"), [source])}


__all__ = ["EnrichmentQueue"]
