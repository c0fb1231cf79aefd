"""Matching: which records changed since each watch last looked, which of them its search
selects, and one outbox row per (watch, record version).

The search itself is the reading side's (`reading/search.py` `build_query`): a watch is a
RecordFilter, answered among the candidate ids (the records whose `updated_at` or
`translated_at` moved since the watch's `checked_until`, a little before it to cover a batch
committed after its timestamp was taken) kept in a temporary table, so a watch costs a lookup
among the new records, not a search of the store; all watches of a type are answered together
(`selection.py`: each distinct term found once, the other filters as sets).

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
import functools
import hashlib
import json
import logging
import os
import uuid
from dataclasses import dataclass, field

from basecrawler.formats.dates import utc_now_iso
from basecrawler.reading.search import RecordFilter, UnknownFilter, check_facets
from basecrawler.recordtypes import RecordType, record_types
from basecrawler.store.engines.dialect import POSTGRES, dialect_of
from basecrawler.watch import outbox, selection
from basecrawler.watch.model import Watch
from basecrawler.watch.repository import all_watches, set_checked

log = logging.getLogger("basecrawler.watch")

OVERLAP = dt.timedelta(minutes=10)
HOLD_ENV = "BASECRAWLER_WATCH_HOLD_HOURS"
DEFAULT_HOLD_HOURS = 48.0
_NAMESPACE = uuid.UUID("6f2d3c1e-8b7a-5d4c-9e0f-3a2b1c0d9e8f")
_NAMESPACE_BYTES = _NAMESPACE.bytes
_CANDIDATES = "watch_candidates"
_CHUNK = 500


@dataclass
class MatchReport:
    candidates: int = 0
    matched: int = 0
    queued: int = 0          # new outbox rows, pending or held
    held: int = 0
    per_watch: dict = field(default_factory=dict)   # name → rows queued


@functools.lru_cache(maxsize=64)
def _described_columns(record_type: RecordType) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*record_type.data_columns, *record_type.korean_columns)))


def version_of(record_type: RecordType, row: dict) -> str:
    """A digest of the record's data and Korean columns (the JSON of them, keys sorted)."""
    columns = _described_columns(record_type)
    values = dict(zip(columns, map(row.get, columns)))
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str, ensure_ascii=False).encode()).hexdigest()[:24]


def delivery_id(watch: Watch, type_name: str, record_id: int, version: str) -> str:
    """uuid5 of the (watch, record version) in `_NAMESPACE`, its text computed without a UUID
    object (one per match: a third of a pass's Python time before)."""
    name = f"{watch.id}:{watch.created_at}:{type_name}:{record_id}:{version}".encode()
    digest = bytearray(hashlib.sha1(_NAMESPACE_BYTES + name).digest()[:16])
    digest[6] = digest[6] & 0x0F | 0x50   # version 5
    digest[8] = digest[8] & 0x3F | 0x80   # RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def payload_of(record_type: RecordType, row: dict) -> dict:
    """What a delivery says about the record: its identity, best line (Korean and original)
    and every non-empty field, as stored when it matched."""
    korean, original = record_type.best_text(row)
    url = next((row.get(f) for f in record_type.url_fields if row.get(f)), None)
    columns = _described_columns(record_type)
    fields = {c: v for c, v in zip(columns, map(row.get, columns)) if v not in (None, "", "[]", "{}")}
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
    d = dialect_of(store)

    def op(db):
        db.conn.execute(d.write(f"CREATE TEMP TABLE IF NOT EXISTS {_CANDIDATES} (id BIGINT PRIMARY KEY)"))
        db.conn.execute(d.write(f"DELETE FROM {_CANDIDATES}"))
        if cutoff is None:
            db.conn.execute(d.write(f"INSERT INTO {_CANDIDATES} (id) SELECT id FROM {table}"))
        else:
            db.conn.execute(d.write(f"INSERT INTO {_CANDIDATES} (id) SELECT id FROM {table} "
                                    f"WHERE updated_at > {d.p} OR translated_at > {d.p}"), [cutoff, cutoff])
    store.write(op)
    if d is POSTGRES:   # autovacuum never analyzes a temporary table: the planner would guess
        store.write(lambda db: db.conn.execute(d.write(f"ANALYZE {_CANDIDATES}")))
    return store.scalar(d.query(f"SELECT COUNT(*) FROM {_CANDIDATES}"))


def _rows(store, record_type: RecordType, ids) -> dict[int, dict]:
    ids, found = sorted(ids), {}
    d = dialect_of(store)
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        sql = d.query(f"SELECT * FROM {record_type.table} WHERE id IN ({d.params(len(chunk))})")
        for row in store.query(sql, chunk):
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
            by_search = selection.matching_ids(store, record_type, [f for _, f in members], _CANDIDATES)
            for watch, filters in members:
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
    d = dialect_of(conn)
    report.queued = report.held = 0
    report.per_watch = {}
    known: dict[tuple, dict] = {}   # (watch, type, record) → {version: (row id, state)}, and "sent"
    ids = sorted({w.id for w, _, _ in found})
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        for row_id, watch_id, type_name, record_id, version, state in conn.execute(d.query(
                "SELECT id, watch_id, record_type, record_id, version, state FROM watch_outbox "
                f"WHERE state != 'superseded' AND watch_id IN ({d.params(len(chunk))})"), chunk).fetchall():
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
        if entry:
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
    conn.executemany(d.write(f"UPDATE watch_outbox SET state = 'pending' WHERE id = {d.p}"), releases)
    conn.executemany(d.write(f"UPDATE watch_outbox SET state = 'superseded' WHERE id = {d.p}"),
                     [s for s in supersede if s[0]])
    outbox.insert_new(conn, inserts)
    set_checked(db, watch_ids, now)


def hold_hours() -> float:
    try:
        return float(os.environ.get(HOLD_ENV) or DEFAULT_HOLD_HOURS)
    except ValueError:
        return DEFAULT_HOLD_HOURS


def release_held(store, *, now: str | None = None) -> int:
    """Held rows no translation reached within the hold time go out with the original text."""
    now = now or utc_now_iso()
    limit = (dt.datetime.fromisoformat(now) - dt.timedelta(hours=hold_hours())).isoformat(timespec="seconds")
    d = dialect_of(store)
    return store.write(lambda db: db.conn.execute(d.write(
        f"UPDATE watch_outbox SET state = 'pending' WHERE state = 'held' AND created_at <= {d.p}"), [limit]).rowcount)


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
