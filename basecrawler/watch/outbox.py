"""The outbox: claiming pending deliveries, marking them sent or failed (retried with
back-off, given up after a bound), and the counts `status` shows per watch."""
from __future__ import annotations

import datetime as dt
import json
import os
import uuid

from basecrawler.formats.dates import utc_now_iso
from basecrawler.store.engines.dialect import POSTGRES, dialect_of

MAX_ATTEMPTS_ENV = "BASECRAWLER_WATCH_MAX_ATTEMPTS"
DEFAULT_MAX_ATTEMPTS = 5
BACKOFF_BASE_S = 30.0
BACKOFF_CAP_S = 3600.0
CLAIM_STALE = dt.timedelta(minutes=15)   # a claim older than this belongs to a process that died


OUTBOX_COLUMNS = ("delivery_id", "watch_id", "record_type", "record_id", "version", "change", "payload", "state",
                  "created_at")
_UNIQUE_VIOLATION = "23505"


def insert_new(conn, rows: list[list]) -> None:
    """New outbox rows (values in OUTBOX_COLUMNS order; a unique key already holding one is
    left as it is), inside the caller's transaction. PostgreSQL: one COPY, in a savepoint; a
    row another process queued meanwhile fails it, and the rows go again as one INSERT …
    ON CONFLICT DO NOTHING (`_insert_json`). The COPY costs half of that INSERT, most of which
    is the speculative insertion ON CONFLICT makes into each unique index (bench/README.md)."""
    if not rows:
        return
    columns = ", ".join(OUTBOX_COLUMNS)
    d = dialect_of(conn)
    if d is not POSTGRES:
        conn.executemany(d.write(f"INSERT INTO watch_outbox ({columns}, attempts) "
                                 f"VALUES ({d.params(len(OUTBOX_COLUMNS))}, 0) ON CONFLICT DO NOTHING"), rows)
        return
    sql = d.write(f"COPY watch_outbox ({columns}, attempts) FROM STDIN")

    def copy(raw):
        with raw.cursor().copy(sql) as copying:
            for row in rows:
                copying.write_row((*row, 0))
    conn.execute(d.write("SAVEPOINT watch_outbox_copy"))
    try:
        conn.run_statement(sql, copy, read_only=False)
    except Exception as exc:
        if getattr(exc, "sqlstate", None) != _UNIQUE_VIOLATION:
            raise
        conn.execute(d.write("ROLLBACK TO SAVEPOINT watch_outbox_copy"))
        _insert_json(conn, rows)
    conn.execute(d.write("RELEASE SAVEPOINT watch_outbox_copy"))


_PAYLOAD = OUTBOX_COLUMNS.index("payload")


def _insert_json(conn, rows: list[list]) -> None:
    """PostgreSQL, INSERT … ON CONFLICT DO NOTHING: one statement per 5,000 rows, handed over
    as JSON texts the server takes apart, each record's payload once however many watches it
    matched: an executemany there is a statement a row, a VALUES list of 900 parameters is
    parsed again by psycopg each time, and text arrays of the payloads are escaped character
    by character (each slower by seconds for a pass of the bench, bench/README.md)."""
    types = ("text", "bigint", "text", "bigint", "text", "text", None, "text", "text")
    values = ", ".join(f"p.texts ->> (x ->> {_PAYLOAD})::int" if t is None else f"(x ->> {n})::{t}"
                       for n, t in enumerate(types))
    for start in range(0, len(rows), 5_000):
        chunk, payloads = [], {}
        for row in rows[start:start + 5_000]:
            chunk.append([*row[:_PAYLOAD], payloads.setdefault(row[_PAYLOAD], len(payloads)), *row[_PAYLOAD + 1:]])
        conn.execute(POSTGRES.write(
            f"INSERT INTO watch_outbox ({', '.join(OUTBOX_COLUMNS)}, attempts) SELECT {values}, 0 "
            "FROM (SELECT %s::jsonb AS texts OFFSET 0) AS p, jsonb_array_elements(%s::jsonb) AS x "
            "ON CONFLICT DO NOTHING"),
                     [json.dumps(list(payloads), ensure_ascii=False), json.dumps(chunk, ensure_ascii=False)])


def max_attempts() -> int:
    try:
        return max(1, int(os.environ.get(MAX_ATTEMPTS_ENV) or DEFAULT_MAX_ATTEMPTS))
    except ValueError:
        return DEFAULT_MAX_ATTEMPTS


def claim(store, watch_id: int, *, now: str, limit: int = 500) -> list[dict]:
    """Pending rows of the watch that are due, claimed by this process (another delivering at
    once skips them), oldest first, payload decoded."""
    token = uuid.uuid4().hex
    stale = (dt.datetime.fromisoformat(now) - CLAIM_STALE).isoformat(timespec="seconds")

    d = dialect_of(store)

    def op(db):
        # (a write: on PostgreSQL it locks the rows it claims)
        ids = [r[0] for r in db.conn.execute(d.write(
            f"SELECT id FROM watch_outbox WHERE watch_id = {d.p} AND state = 'pending' AND "
            f"(next_attempt_at IS NULL OR next_attempt_at <= {d.p}) AND (claimed_at IS NULL OR claimed_at < {d.p}) "
            f"ORDER BY id LIMIT {d.p}{store.skip_locked}"), [watch_id, now, stale, limit]).fetchall()]
        db.conn.executemany(d.write(f"UPDATE watch_outbox SET claimed_at = {d.p}, claimed_by = {d.p} WHERE id = {d.p}"),
                            [[now, token, i] for i in ids])
        return ids
    ids = store.write(op)
    if not ids:
        return []
    rows = store.query(d.query(f"SELECT * FROM watch_outbox WHERE id IN ({d.params(len(ids))}) ORDER BY id"), ids)
    for row in rows:
        row["payload"] = json.loads(row["payload"] or "{}")
    return rows


def sent(store, ids, *, now: str) -> None:
    d = dialect_of(store)
    sql = d.write(f"UPDATE watch_outbox SET state = 'sent', sent_at = {d.p}, claimed_at = NULL, last_error = NULL "
                  f"WHERE id = {d.p}")
    store.write(lambda db: db.conn.executemany(sql, [[now, i] for i in ids]))


def release(store, ids) -> None:
    """Claimed but not tried (the pass ran out of time): pending again at once."""
    d = dialect_of(store)
    store.write(lambda db: db.conn.executemany(d.write(f"UPDATE watch_outbox SET claimed_at = NULL WHERE id = {d.p}"),
                                               [[i] for i in ids]))


def failed(store, row: dict, error: str, *, now: str, final: bool = False) -> str:
    """One failed attempt: retried later with back-off, or `failed` for good after the bound
    (or at once when `final`: a refused address). Returns the new state."""
    attempts = (row.get("attempts") or 0) + 1
    give_up = final or attempts >= max_attempts()
    wait = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (attempts - 1))
    due = (dt.datetime.fromisoformat(now) + dt.timedelta(seconds=wait)).isoformat(timespec="seconds")
    state = "failed" if give_up else "pending"
    d = dialect_of(store)
    store.write(lambda db: db.conn.execute(d.write(
        f"UPDATE watch_outbox SET state = {d.p}, attempts = {d.p}, next_attempt_at = {d.p}, last_error = {d.p}, "
        f"claimed_at = NULL WHERE id = {d.p}"), [state, attempts, due, error[:500], row["id"]]))
    return state


def recent(store, watch_id: int | None, *, limit: int = 100) -> list[dict]:
    """The newest sent or pending rows (a feed), one per record version, payload decoded."""
    d = dialect_of(store)
    where = "state IN ('sent', 'pending')" + (f" AND watch_id = {d.p}" if watch_id is not None else "")
    rows = store.query(d.query(f"SELECT * FROM watch_outbox WHERE {where} ORDER BY id DESC LIMIT {d.p}"),
                       [*([watch_id] if watch_id is not None else []), limit * (1 if watch_id is not None else 4)])
    seen, out = set(), []
    for row in rows:
        key = (row["record_type"], row["record_id"], row["version"])
        if key in seen:
            continue
        seen.add(key)
        row["payload"] = json.loads(row["payload"] or "{}")
        out.append(row)
    return out[:limit]


def counts(store) -> dict[str, dict]:
    """Per watch name: rows per state, the last delivery and the last error."""
    out = {}
    for row in store.query(dialect_of(store).query(
            "SELECT w.name AS name, o.state AS state, COUNT(o.id) AS n, MAX(o.sent_at) AS last, "
            "MAX(o.last_error) AS error FROM watches AS w LEFT JOIN watch_outbox AS o "
            "ON o.watch_id = w.id GROUP BY w.name, o.state ORDER BY w.name")):
        entry = out.setdefault(row["name"], {"held": 0, "pending": 0, "sent": 0, "failed": 0, "last_delivery": None,
                                             "last_error": None})
        if row["state"]:
            entry[row["state"]] = row["n"]
        if row["last"] and (entry["last_delivery"] or "") < row["last"]:
            entry["last_delivery"] = row["last"]
        if row["state"] in ("failed", "pending") and row["error"] and (row["state"] == "failed" or not entry["last_error"]):
            entry["last_error"] = row["error"]
    return out


def now_iso() -> str:
    return utc_now_iso()
