"""Enrichment ladder for two-phase sources (feed ahead of meta). See docs/DETAILS.md,
"The enrichment ladder". Called by BaseCrawler.run():

    enqueue(crawler, records)   after each stored batch: queue the records needing detail
    run_ladder(crawler) -> dict after the list is stored: claim due items, call fetch_detail,
                                apply results with COALESCE; returns counts for the run log

One row per record in the `enrichment` table:

    pending ──► processing ──► done      fetch_detail returned fields (stored with COALESCE)
       ▲            │      ├─► empty     fetch_detail returned None: exists, nothing to add
       │            │      ├─► retry     NotFound ("not yet"): level 1..N, backoff per level
       │            │      └─► gone      NotFound again at the last level (full mode re-queues)
       └────────────┘  transient / rate limited / crashed worker: same level, short delay

Only NotFound climbs the ladder; a transient failure never brings an item closer to `gone`.
Workers only call fetch_detail (the HTTP client archives responses through the store, whose
lock serialises that); every ladder write happens on the calling thread, in completion order.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from basecrawler.errors import Blocked, CredentialsRejected, Interrupted, NotFound, RateLimited, SourceFailed, Transient
from basecrawler.store.lookup import decode_row

log = logging.getLogger(__name__)

PENDING, PROCESSING, DONE, EMPTY, RETRY, GONE = "pending", "processing", "done", "empty", "retry", "gone"
STATES = (PENDING, PROCESSING, DONE, EMPTY, RETRY, GONE)
DUE_STATES = (PENDING, RETRY)

# A blocked host or rejected credentials is the source's problem, not the item's: stop asking.
_STOP_ERRORS = (Blocked, CredentialsRejected)
_TRANSIENT_ERRORS = (Transient, RateLimited)


def timestamp(seconds: float) -> str:
    """Clock seconds as fixed-width UTC ISO text, so stored times compare as strings."""
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).isoformat(timespec="microseconds")


def record_from_row(crawler, row: dict):
    """The stored row as a record of the source's type (Korean columns, derived columns and
    store bookkeeping left out)."""
    rt = crawler.default_type()
    values = decode_row(rt, {col: row.get(col) for col in rt.model.model_fields if col in row})
    if "date_unknown" in values:
        values["date_unknown"] = bool(values["date_unknown"])
    return rt.model.model_validate(values)


# The queue's key, whatever the type's key fields: `record_key` holds the last field of the
# type's key (the publisher's number), `key_prefix` the others (one field as it is, several as
# a JSON list, none as ""), `record_date` the record's date (the claim order). A vehicle
# recall's are its country, recall number and date (migration 10 renamed the columns from those).
def _queue_key(crawler, values) -> tuple[str, str]:
    """(key_prefix, record_key) of a record's key fields (`values(name)`)."""
    key = crawler.default_type().key
    prefix = [values(name) for name in key[:-1]]
    return ("" if not prefix else prefix[0] if len(prefix) == 1 else json.dumps(prefix)), values(key[-1])


def _stored_key(crawler, item: dict) -> tuple:
    """The store's key (source first) of a queue item."""
    key = crawler.default_type().key
    prefix = item["key_prefix"]
    values = [] if len(key) == 1 else [prefix] if len(key) == 2 else json.loads(prefix)
    return (crawler.source, *values, item["record_key"])


def _row_date(crawler, row: dict):
    field = crawler.default_type().date_field
    return row.get(field) if field else None


# ---- enqueue ---------------------------------------------------------------------------
def enqueue(crawler, records, failed: list[dict] = ()) -> int:
    """Queue every stored record that still needs detail (records of the source's own type;
    `failed`: rows the store refused); returns how many were new to the queue. Items already
    queued keep their state (a `done` item is not asked again, a `gone` one waits for a full
    run); only their record_date follows the list, for claim order."""
    rt = crawler.default_type()
    refused = {tuple(row.get(name) for name in rt.key_columns) for row in failed}
    keys = {(crawler.source, *(getattr(r, name) for name in rt.key)) for r in records} - refused
    if not keys:
        return 0
    stored = crawler.store.lookup.rows_by_key(rt, keys)
    wanted = []
    for row in stored.values():
        try:
            if crawler.needs_detail(record_from_row(crawler, row)):
                wanted.append((*_queue_key(crawler, row.get), _row_date(crawler, row)))
        except ValidationError as exc:  # a stored row the model rejects cannot be enriched either
            log.warning("%s: %s not queued for detail: %s", crawler.source, row.get(rt.key[-1]), exc)
    if not wanted:
        return 0
    return crawler.store.enrichment.enqueue(crawler.source, wanted, state=PENDING, now=timestamp(crawler.clock()))


# ---- queue maintenance -----------------------------------------------------------------
def requeue_gone(crawler) -> int:
    """Put every `gone` item of the source back at the bottom of the ladder (full runs)."""
    count = crawler.store.enrichment.requeue(crawler.source, state=GONE, to=PENDING, now=timestamp(crawler.clock()))
    if count:
        log.info("%s: full run re-queued %d enrichment item(s) marked gone", crawler.source, count)
    return count


def reclaim_stale(crawler) -> int:
    """Items left `processing` longer than the timeout belong to a worker that died: put them
    back at their level, due now. A crash is not the item's fault, so no level is added."""
    now = crawler.clock()
    rows = crawler.store.enrichment.reclaim(crawler.source, claimed=PROCESSING,
                                            claimed_before=timestamp(now - crawler.settings.processing_timeout_s),
                                            retry=RETRY, pending=PENDING, now=timestamp(now))
    if rows:
        log.warning("%s: reclaimed %d enrichment item(s) stuck in processing (worker died?): %s",
                    crawler.source, len(rows), ", ".join(rows[:10]) + (" …" if len(rows) > 10 else ""))
    return len(rows)


def claim_due(crawler, limit: int | None = None) -> list[dict]:
    """Mark up to `limit` due items `processing` (newest recall first) and return them.
    One write transaction, so two claimers can never take the same item."""
    limit = crawler.settings.enrich_limit if limit is None else limit
    return crawler.store.enrichment.claim(crawler.source, due=DUE_STATES, claimed=PROCESSING,
                                          now=timestamp(crawler.clock()), limit=limit)


# ---- the ladder ------------------------------------------------------------------------
@dataclass
class _Outcome:
    item: dict
    kind: str                 # fields / empty / not_found / transient / stop / error / released
    fields: dict | None = None
    error: BaseException | None = None


def _ask(crawler, item: dict, recall: dict, stop: threading.Event) -> _Outcome:
    """Worker: one fetch_detail call, classified. The ladder bookkeeping stays on the caller."""
    if stop.is_set():
        return _Outcome(item, "released")
    try:
        fields = crawler.detail_of(recall)
    except NotFound as exc:
        return _Outcome(item, "not_found", error=exc)
    except Interrupted:   # the run's stop cut this lookup: not the item's failure, it goes back as it was
        return _Outcome(item, "released")
    except _TRANSIENT_ERRORS as exc:
        return _Outcome(item, "transient", error=exc)
    except _STOP_ERRORS as exc:
        stop.set()
        return _Outcome(item, "stop", error=exc)
    except Exception as exc:  # a bug or odd payload in one detail must not stop the others
        return _Outcome(item, "error", error=exc)
    return _Outcome(item, "fields" if fields else "empty", fields=fields or None)


def run_ladder(crawler) -> dict:
    """Requeue (full mode), reclaim, claim, fetch in parallel, apply. Returns the run's counts."""
    stats = {key: 0 for key in ("claimed", "done", "empty", "not_yet", "gone", "transient", "errors",
                                "reclaimed", "requeued_gone", "released")}
    if crawler.mode == "full":
        stats["requeued_gone"] = requeue_gone(crawler)
    stats["reclaimed"] = reclaim_stale(crawler)
    items = claim_due(crawler)
    stats["claimed"] = len(items)
    if not items:
        _log_summary(crawler, stats)
        return stats

    stored = crawler.store.lookup.rows_by_key(crawler.default_type(), [_stored_key(crawler, i) for i in items])
    work: list[tuple[dict, dict]] = []
    for item in items:
        row = stored.get(_stored_key(crawler, item))
        if row is None:
            _settle(crawler, item, EMPTY, error="the recall row no longer exists")
            stats["empty"] += 1
            continue
        if not crawler.needs_detail(record_from_row(crawler, row)):
            _settle(crawler, item, DONE)  # the list itself filled what detail would have
            stats["done"] += 1
            continue
        row = dict(row)
        row = decode_row(crawler.default_type(), row)   # `extra` a dict, multi-valued fields lists
        work.append((item, row))

    crawler.http  # create the shared client before threads race to create it
    stop = threading.Event()
    stop_error: BaseException | None = None
    workers = max(1, min(crawler.settings.enrich_workers, len(work) or 1))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"enrich-{crawler.source}") as pool:
        futures = [pool.submit(_ask, crawler, item, row, stop) for item, row in work]
        rows_by_id = {item["id"]: row for item, row in work}
        for future in as_completed(futures):
            outcome = future.result()
            if outcome.kind == "stop":
                stop_error = stop_error or outcome.error
            _apply(crawler, outcome, rows_by_id[outcome.item["id"]], stats)
    _log_summary(crawler, stats)
    crawler.check_stop()   # lookups cut by a stop were released above; the run is interrupted, not done
    if stop_error is not None:
        raise SourceFailed(f"detail lookups stopped: {stop_error} (enrichment so far: "
                           + ", ".join(f"{k} {v}" for k, v in stats.items() if v) + ")") from stop_error
    return stats


def _apply(crawler, outcome: _Outcome, row: dict, stats: dict) -> None:
    item = outcome.item
    number = item["record_key"]
    if outcome.kind == "fields":
        try:
            # Same checks as a crawled record: plausible date, links on the public host.
            record = crawler.prepare_record(_merged_record(crawler, row, outcome.fields))
        except (ValidationError, TypeError, ValueError) as exc:
            _failed_once(crawler, item, exc, raw=outcome.fields, kind="validation")
            stats["errors"] += 1
            return
        result = crawler.store.upsert(crawler.default_type(), [record], source=crawler.source, raws=[outcome.fields])
        if result.failed:
            _failed_once(crawler, item, result.failed[0][1], raw=outcome.fields, kind="store_error")
            stats["errors"] += 1
            return
        _settle(crawler, item, DONE, attempted=True)
        stats["done"] += 1
    elif outcome.kind == "empty":
        _settle(crawler, item, EMPTY, attempted=True)
        stats["empty"] += 1
    elif outcome.kind == "not_found":
        _climb(crawler, item, outcome.error, stats)
    elif outcome.kind in ("transient", "stop"):
        _stay(crawler, item, outcome.error, attempted=True)
        stats["transient"] += 1
        log.warning("%s: detail %s failed for now (%s); stays at level %d, retried later",
                    crawler.source, number, outcome.error, item["level"])
    elif outcome.kind == "released":
        _stay(crawler, item, None, attempted=False, delay=0.0)
        stats["released"] += 1
    else:
        _failed_once(crawler, item, outcome.error, raw=row, kind=getattr(outcome.error, "kind", "detail_error"))
        stats["errors"] += 1


def _merged_record(crawler, row: dict, fields: dict):
    """Stored row + detail fields → a record for the COALESCE upsert (a None never erases;
    the key stays the stored one)."""
    rt = crawler.default_type()
    base = record_from_row(crawler, {**row, "extra": row.get("extra") or {}}).model_dump()
    for key, value in fields.items():
        if key in rt.key or value is None:
            continue
        if key == "extra":
            base["extra"] = {**(base.get("extra") or {}), **value}
        else:
            base[key] = value
    return rt.model.model_validate(base)


def _climb(crawler, item: dict, error: BaseException | None, stats: dict) -> None:
    """NotFound: one rung up with that rung's backoff; past the last rung the item is gone."""
    backoffs = tuple(crawler.settings.ladder_backoffs_s)
    level = item["level"] + 1
    number = item["record_key"]
    if level > len(backoffs):
        _settle(crawler, item, GONE, attempted=True, error=str(error), level=item["level"])
        stats["gone"] += 1
        log.error("%s: detail for %s never appeared after %d attempts; marked gone (a full run re-queues it)",
                  crawler.source, number, item["attempts"] + 1)
        return
    delay = backoffs[level - 1]
    _settle(crawler, item, RETRY, attempted=True, error=str(error), level=level,
            next_attempt=crawler.clock() + delay)
    stats["not_yet"] += 1
    log.info("%s: detail for %s not there yet; retry level %d in %.0fs", crawler.source, number, level, delay)


def _stay(crawler, item: dict, error, *, attempted: bool, delay: float | None = None) -> None:
    """Back to the item's own level, due after a short delay; nothing counts towards gone."""
    delay = crawler.settings.transient_retry_delay_s if delay is None else delay
    state = RETRY if item["level"] > 0 else PENDING
    now = crawler.clock()
    crawler.store.enrichment.release(item["id"], state=state, due=timestamp(now + delay), now=timestamp(now),
                                     attempted=attempted, error=str(error) if error is not None else None)


def _failed_once(crawler, item: dict, error, *, raw: Any, kind: str) -> None:
    """A detail that cannot be used: keep it as a dead letter (once per distinct error, not
    on every run), leave the item retryable at its level. A later success resolves it."""
    message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    if message != item.get("last_error"):
        body = getattr(error, "body", None)
        crawler.dead_letter(body if body else raw, error, stage="detail", kind=kind,
                            key=item["record_key"], url=getattr(error, "url", None))
    else:
        log.warning("%s: detail for %s failed again the same way: %s", crawler.source, item["record_key"], message)
    _stay(crawler, item, message, attempted=True)


def _settle(crawler, item: dict, state: str, *, attempted: bool = False, error: str | None = None,
            level: int | None = None, next_attempt: float | None = None) -> None:
    crawler.store.enrichment.settle(
        crawler.source, item, state=state, level=item["level"] if level is None else level,
        due=timestamp(next_attempt) if next_attempt is not None else None, now=timestamp(crawler.clock()),
        attempted=attempted, error=error,
        resolve_letters=state in (DONE, EMPTY))   # an earlier unusable detail of this record is now settled


def _log_summary(crawler, stats: dict) -> None:
    if not any(stats.values()):
        return
    text = (f"{crawler.source}: enrichment claimed {stats['claimed']} → done {stats['done']}, empty {stats['empty']}, "
            f"not yet {stats['not_yet']}, gone {stats['gone']}, transient {stats['transient']}, "
            f"errors {stats['errors']} (reclaimed {stats['reclaimed']}, re-queued gone {stats['requeued_gone']}"
            f", released {stats['released']})")
    (log.warning if stats["gone"] or stats["errors"] else log.info)(text)


__all__ = ["enqueue", "run_ladder", "claim_due", "reclaim_stale", "requeue_gone", "STATES",
           "record_from_row", "timestamp"]
