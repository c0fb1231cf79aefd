"""Matching: which records changed since each watch last looked, which of them its search
selects, and one outbox row per (watch, record version).

The search itself is the reading side's (`reading/search.py` `build_query`): a watch is a
RecordFilter, and its SQL is read restricted to the candidate ids (the records whose
`updated_at` or `translated_at` moved since the watch's `checked_until`, a little before it
to cover a batch committed after its timestamp was taken) kept in a temporary table, so a
watch costs a lookup among the new records, not a search of the store. Watches with the same
search share one query.

A record's version is a digest of its data and Korean columns: an unchanged re-run (which
writes nothing, so `updated_at` stays) adds nothing; a changed remedy, date or translation is
a new version. Reads happen outside any transaction; the outbox rows and the cursors are
written in one, so a crash before its commit leaves the cursors where they were and the next
pass finds the same records again (the unique key keeps what was queued once queued once).

A record not yet translated is queued `held` (unless the watch says as soon as seen): its
translation makes a new version, queued `pending`, which supersedes it; a translation that
left it without Korean (blocked, failed) releases it as it is; `release_held` releases the
ones no translation reached within the hold time.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import uuid
from dataclasses import dataclass, field

from basecrawler.formats.dates import utc_now_iso
from basecrawler.reading.search import RecordFilter, UnknownFilter, build_query, check_facets, short_index
from basecrawler.recordtypes import RecordType, record_types
from basecrawler.watch import pg_terms
from basecrawler.watch.model import Watch
from basecrawler.watch.repository import all_watches, set_checked

log = logging.getLogger("basecrawler.watch")

OVERLAP = dt.timedelta(minutes=10)
HOLD_ENV = "BASECRAWLER_WATCH_HOLD_HOURS"
DEFAULT_HOLD_HOURS = 48.0
_NAMESPACE = uuid.UUID("6f2d3c1e-8b7a-5d4c-9e0f-3a2b1c0d9e8f")
_CANDIDATES = "watch_candidates"
_CHUNK = 500


@dataclass
class MatchReport:
    candidates: int = 0
    matched: int = 0
    queued: int = 0          # new outbox rows, pending or held
    held: int = 0
    per_watch: dict = field(default_factory=dict)   # name → rows queued


def version_of(record_type: RecordType, row: dict) -> str:
    values = {c: row.get(c) for c in (*record_type.data_columns, *record_type.korean_columns)}
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str, ensure_ascii=False).encode()).hexdigest()[:24]


def delivery_id(watch: Watch, type_name: str, record_id: int, version: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, f"{watch.id}:{watch.created_at}:{type_name}:{record_id}:{version}"))


def payload_of(record_type: RecordType, row: dict) -> dict:
    """What a delivery says about the record: its identity, best line (Korean and original)
    and every non-empty field, as stored when it matched."""
    korean, original = record_type.best_text(row)
    url = next((row.get(f) for f in record_type.url_fields if row.get(f)), None)
    fields = {c: row.get(c) for c in (*record_type.data_columns, *record_type.korean_columns)
              if row.get(c) not in (None, "", "[]", "{}")}
    for column in record_type.json_columns:
        if isinstance(fields.get(column), str):
            try:
                fields[column] = json.loads(fields[column])
            except ValueError:
                pass
    return {"record_type": record_type.name, "record_title": record_type.title, "id": row["id"],
            "source": row.get("source"), "key": {c: row.get(c) for c in record_type.key_columns},
            "title_ko": korean, "title_original": original, "url": url,
            "date": row.get(record_type.date_field) if record_type.date_field else None,
            "updated_at": row.get("updated_at"), "translated_at": row.get("translated_at"), "fields": fields}


def filter_for(watch: Watch, record_type: RecordType) -> RecordFilter | None:
    """The watch's search on this type, or None when the type cannot answer it (a facet or
    the country column it does not have)."""
    if watch.record_type not in (None, record_type.name):
        return None
    try:
        check_facets(record_type, watch.facets)
    except UnknownFilter:
        return None
    if watch.countries and "country" not in record_type.data_columns:
        return None
    return RecordFilter(text=watch.text, countries=tuple(watch.countries), record_type=record_type.name,
                        facets=tuple(watch.facets), source=watch.sources[0] if len(watch.sources) == 1 else None)


def _cutoff(watch: Watch) -> str | None:
    if not watch.checked_until:
        return None
    return (dt.datetime.fromisoformat(watch.checked_until) - OVERLAP).isoformat(timespec="seconds")


def _fill_candidates(store, record_type: RecordType, cutoff: str | None) -> int:
    table = record_type.table

    def op(db):
        db.conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {_CANDIDATES} (id BIGINT PRIMARY KEY)")
        db.conn.execute(f"DELETE FROM {_CANDIDATES}")
        if cutoff is None:
            db.conn.execute(f"INSERT INTO {_CANDIDATES} (id) SELECT id FROM {table}")
        else:
            db.conn.execute(f"INSERT INTO {_CANDIDATES} (id) SELECT id FROM {table} "
                            "WHERE updated_at > ? OR translated_at > ?", [cutoff, cutoff])
    store.write(op)
    if store.engine == "postgresql":   # autovacuum never analyzes a temporary table: the planner would guess
        store.write(lambda db: db.conn.execute(f"ANALYZE {_CANDIDATES}"))
    return store.scalar(f"SELECT COUNT(*) FROM {_CANDIDATES}")


def _matching_ids(store, filters: RecordFilter) -> list[tuple[int, str]]:
    # `grams`: the type's padded (SQLite) or windows (PostgreSQL) index answers the terms, as
    # in `search`; without it PostgreSQL read each term with an ILIKE over the whole table.
    grams = short_index(store.db.conn, filters.declaration())
    sql, params = build_query(filters, columns="r.id AS id, r.source AS source", ordered=False,
                              dialect=getattr(store.db.conn, "dialect", "sqlite"), grams=grams)
    rows = store.query(f"SELECT m.id, m.source FROM ({sql}) AS m WHERE m.id IN (SELECT id FROM {_CANDIDATES})", params)
    return [(r["id"], r["source"]) for r in rows]


def _rows(store, record_type: RecordType, ids) -> dict[int, dict]:
    ids, found = sorted(ids), {}
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        for row in store.query(f"SELECT * FROM {record_type.table} WHERE id IN ({','.join('?' * len(chunk))})", chunk):
            found[row["id"]] = row
    return found


def match(store, *, now: str | None = None, watches: list[Watch] | None = None) -> MatchReport:
    """Queue every new record version each watch selects; move the watches' cursors to `now`."""
    now = now or utc_now_iso()
    watches = all_watches(store) if watches is None else watches
    report = MatchReport()
    found: list[tuple[Watch, RecordType, int]] = []
    rows_by_type: dict[str, dict[int, dict]] = {}
    for record_type in record_types().values():
        groups: dict[str | None, list[tuple[Watch, RecordFilter]]] = {}
        for watch in watches:
            filters = filter_for(watch, record_type)
            if filters is not None:
                groups.setdefault(_cutoff(watch), []).append((watch, filters))
        wanted: set[int] = set()
        for cutoff, members in groups.items():
            candidates = _fill_candidates(store, record_type, cutoff)
            report.candidates += candidates
            if not candidates:
                continue
            by_search: dict[RecordFilter, list[tuple[int, str]]] = {}
            if pg_terms.usable(store, record_type):
                by_search = pg_terms.matching_ids(store, record_type, [f for _, f in members], _CANDIDATES)
            for watch, filters in members:
                if filters not in by_search:
                    by_search[filters] = _matching_ids(store, filters)
                for record_id, source in by_search[filters]:
                    if not watch.sources or source in watch.sources:
                        found.append((watch, record_type, record_id))
                        wanted.add(record_id)
        if wanted:
            rows_by_type[record_type.name] = _rows(store, record_type, wanted)
    report.matched = len(found)
    store.write(lambda db: _queue(db, found, rows_by_type, now, report, [w.id for w in watches]))
    if report.queued:
        log.info("watches: %d new or changed matches queued (%d waiting for Korean)", report.queued, report.held)
    return report


def _queue(db, found, rows_by_type, now: str, report: MatchReport, watch_ids) -> None:
    """The outbox rows for `found`, written in bulk: what each (watch, record) already has is
    read once, so a pass costs a few statements however many records matched."""
    conn = db.conn
    report.queued = report.held = 0
    report.per_watch = {}
    known: dict[tuple, dict] = {}   # (watch, type, record) → {version: (row id, state)}, and "sent"
    ids = sorted({w.id for w, _, _ in found})
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        for row_id, watch_id, type_name, record_id, version, state in conn.execute(
                "SELECT id, watch_id, record_type, record_id, version, state FROM watch_outbox "
                f"WHERE state != 'superseded' AND watch_id IN ({','.join('?' * len(chunk))})", chunk).fetchall():
            entry = known.setdefault((watch_id, type_name, record_id), {})
            entry[version] = (row_id, state)
            entry["sent"] = entry.get("sent") or state == "sent"
    inserts, releases, supersede = [], [], []
    described: dict[tuple[str, int], tuple[str, str]] = {}   # (type, record) → version, payload: once a record
    for watch, record_type, record_id in found:
        row = rows_by_type.get(record_type.name, {}).get(record_id)
        if row is None:   # removed between the two reads
            continue
        if (record_type.name, record_id) not in described:
            described[record_type.name, record_id] = (
                version_of(record_type, row), json.dumps(payload_of(record_type, row), ensure_ascii=False, default=str))
        version, payload = described[record_type.name, record_id]
        waiting = bool(not watch.as_soon_as_seen and record_type.korean_columns and not row.get("translated_at"))
        entry = known.setdefault((watch.id, record_type.name, record_id), {})
        if version in entry:
            row_id, state = entry[version]
            if state == "held" and not waiting:   # translated without Korean: release it as it is
                releases.append([row_id])
            continue
        supersede += [[row_id] for v, (row_id, state) in
                      ((v, e) for v, e in entry.items() if v != "sent") if state in ("held", "pending")]
        inserts.append([delivery_id(watch, record_type.name, record_id, version), watch.id, record_type.name,
                        record_id, version, "changed" if entry.get("sent") else "new",
                        payload,
                        "held" if waiting else "pending", now])
        entry[version] = (None, "held" if waiting else "pending")
        report.queued += 1
        report.held += waiting
        report.per_watch[watch.name] = report.per_watch.get(watch.name, 0) + 1
    conn.executemany("UPDATE watch_outbox SET state = 'pending' WHERE id = ?", releases)
    conn.executemany("UPDATE watch_outbox SET state = 'superseded' WHERE id = ?", [s for s in supersede if s[0]])
    _insert(conn, inserts)
    set_checked(db, watch_ids, now)


_OUTBOX_COLUMNS = "delivery_id, watch_id, record_type, record_id, version, change, payload, state, created_at"
_PAYLOAD = 6


def _insert(conn, rows: list[list]) -> None:
    """New outbox rows (a unique key already holding one is left as it is). PostgreSQL: one
    statement per 5,000 rows, handed over as JSON texts the server takes apart, each record's
    payload once however many watches it matched (`_PAYLOAD` is its column): an executemany
    there is a statement a row, a VALUES list of 900 parameters is parsed again by psycopg each
    time, and text arrays of the payloads are escaped character by character (each slower by
    seconds for a pass of the bench, bench/README.md)."""
    if getattr(conn, "dialect", "sqlite") != "postgresql":
        conn.executemany(f"INSERT INTO watch_outbox ({_OUTBOX_COLUMNS}, attempts) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0) ON CONFLICT DO NOTHING", rows)
        return
    types = ("text", "bigint", "text", "bigint", "text", "text", None, "text", "text")
    values = ", ".join("p.texts ->> (x ->> 6)::int" if t is None else f"(x ->> {n})::{t}" for n, t in enumerate(types))
    for start in range(0, len(rows), 5_000):
        chunk, payloads = [], {}
        for row in rows[start:start + 5_000]:
            chunk.append([*row[:_PAYLOAD], payloads.setdefault(row[_PAYLOAD], len(payloads)), *row[_PAYLOAD + 1:]])
        conn.execute(f"INSERT INTO watch_outbox ({_OUTBOX_COLUMNS}, attempts) SELECT {values}, 0 "
                     "FROM (SELECT ?::jsonb AS texts OFFSET 0) AS p, jsonb_array_elements(?::jsonb) AS x "
                     "ON CONFLICT DO NOTHING",
                     [json.dumps(list(payloads), ensure_ascii=False), json.dumps(chunk, ensure_ascii=False)])


def hold_hours() -> float:
    try:
        return float(os.environ.get(HOLD_ENV) or DEFAULT_HOLD_HOURS)
    except ValueError:
        return DEFAULT_HOLD_HOURS


def release_held(store, *, now: str | None = None) -> int:
    """Held rows no translation reached within the hold time go out with the original text."""
    now = now or utc_now_iso()
    limit = (dt.datetime.fromisoformat(now) - dt.timedelta(hours=hold_hours())).isoformat(timespec="seconds")
    return store.write(lambda db: db.conn.execute(
        "UPDATE watch_outbox SET state = 'pending' WHERE state = 'held' AND created_at <= ?", [limit]).rowcount)


def preview(store, watch: Watch, *, limit: int = 20) -> list[dict]:
    """`watch test`: the newest records the watch's search selects now (nothing queued)."""
    from basecrawler.reading.search import search

    out = []
    for record_type in record_types().values():
        filters = filter_for(watch, record_type)
        if filters is None:
            continue
        for row in search(store.db.conn, filters, limit=limit):
            if not watch.sources or row.get("source") in watch.sources:
                out.append(payload_of(record_type, row))
    return out[:limit]
