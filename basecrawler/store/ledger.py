"""The `list_ledger` table: the items of a source's list, by key, with their state and attempts
(listed → done | failing → given_up; the rules are basecrawler/pipeline/ledger.py's, the
statements here, spelled with the store's dialect). Reached as `store.ledger`."""
from __future__ import annotations

import json
from typing import Iterable

from basecrawler.formats.dates import utc_now_iso
from basecrawler.store.engines.dialect import dialect_of


class ListLedger:
    """The list ledger of one store (its `write` and `query`)."""

    def __init__(self, store):
        self.store = store

    def note(self, source: str, key: str, *, url: str | None, listed_date: str | None, data: dict | None) -> None:
        """Note an item of a source's list; a known item keeps its state and attempts, and
        the facts this listing did not give."""
        now = utc_now_iso()
        d = dialect_of(self.store)
        self.store.write(lambda db: db.conn.execute(d.write(
            "INSERT INTO list_ledger (source, key, url, listed_date, data, state, attempts, first_seen_at, last_seen_at) "
            f"VALUES ({d.params(5)}, 'listed', 0, {d.params(2)}) ON CONFLICT(source, key) DO UPDATE SET "
            "url = COALESCE(excluded.url, list_ledger.url), "
            "listed_date = COALESCE(excluded.listed_date, list_ledger.listed_date), "
            "data = COALESCE(excluded.data, list_ledger.data), last_seen_at = excluded.last_seen_at"),
            [source, key, url, listed_date, json.dumps(data, ensure_ascii=False, default=str) if data else None, now, now]))

    def items(self, source: str, states: Iterable[str]) -> list[dict]:
        """The source's items in these states, oldest listed first (`data` decoded)."""
        states = list(states)
        d = dialect_of(self.store)
        rows = self.store.query(d.query(
            f"SELECT * FROM list_ledger WHERE source = {d.p} AND state IN ({d.params(len(states))}) "
            "ORDER BY listed_date, key"), [source, *states])
        for row in rows:
            row["data"] = json.loads(row["data"]) if row.get("data") else {}
        return rows

    def done(self, source: str, keys: Iterable[str]) -> int:
        """Mark items collected and resolve the dead letters of their failed attempts, in one
        transaction; returns how many letters were resolved."""
        keys = list(keys)
        if not keys:
            return 0
        now = utc_now_iso()
        d = dialect_of(self.store)
        mark = d.write(f"UPDATE list_ledger SET state = 'done', attempts = attempts + 1, last_attempt_at = {d.p}, "
                       f"done_at = {d.p}, last_error = NULL, letters = NULL WHERE source = {d.p} AND key = {d.p}")

        def op(db):
            resolved = 0
            for key in keys:
                resolved += self.store.dead_letters.resolve(db, self._letters(db, source, key), at=now)
                db.conn.execute(mark, [now, now, source, key])
            return resolved
        return self.store.write(op)

    def failed(self, source: str, key: str, error: str, *, max_attempts: int, count: bool = True,
               letters: Iterable[int] = ()) -> dict:
        """One failed attempt (`count`: one that uses up an attempt); the item becomes
        `given_up` once it has used `max_attempts`. Returns its state and attempts."""
        now = utc_now_iso()
        d = dialect_of(self.store)

        def op(db):
            kept = self._letters(db, source, key) + list(letters)
            db.conn.execute(d.write(
                f"UPDATE list_ledger SET attempts = attempts + {d.p}, last_error = {d.p}, last_attempt_at = {d.p}, "
                f"state = CASE WHEN attempts + {d.p} >= {d.p} THEN 'given_up' ELSE 'failing' END, letters = {d.p} "
                f"WHERE source = {d.p} AND key = {d.p}"),
                [int(count), error[:2000], now, int(count), max_attempts, json.dumps(kept) if kept else None,
                 source, key])
            row = db.conn.execute(d.query(f"SELECT state, attempts FROM list_ledger WHERE source = {d.p} AND key = {d.p}"),
                                  [source, key]).fetchone()
            return {"state": row[0], "attempts": row[1]} if row else {}
        return self.store.write(op)

    def requeue_given_up(self, source: str) -> int:
        """Given-up items back to `failing` with their attempts reset (a full run)."""
        d = dialect_of(self.store)
        return self.store.write(lambda db: db.conn.execute(d.write(
            f"UPDATE list_ledger SET state = 'failing', attempts = 0 WHERE source = {d.p} AND state = 'given_up'"),
            [source]).rowcount)

    def counts(self, source: str) -> dict[str, int]:
        """The source's items by state (only the states it has)."""
        d = dialect_of(self.store)
        return {row["state"]: row["n"] for row in self.store.query(d.query(
            f"SELECT state, COUNT(*) AS n FROM list_ledger WHERE source = {d.p} GROUP BY state"), [source])}

    @staticmethod
    def _letters(db, source: str, key: str) -> list[int]:
        """The ids of the fetch dead letters an item's failed attempts left (inside a write)."""
        d = dialect_of(db.conn)
        row = db.conn.execute(d.query(f"SELECT letters FROM list_ledger WHERE source = {d.p} AND key = {d.p}"),
                              [source, key]).fetchone()
        return json.loads(row[0]) if row and row[0] else []


__all__ = ["ListLedger"]
