"""The delivery pass: match (queue new record versions), release held rows past their hold
time, then send each watch's due rows through its channel. Run after every crawl run and
translation batch (`deliver_after_run`), and by `basecrawler watch deliver`.

A row is marked sent after its channel took it, so a crash between the two resends it once,
with the same delivery id (the receiver's idempotency key). A pass has a time budget
(BASECRAWLER_WATCH_BUDGET_S): rows not reached stay pending for the next one, so a slow
receiver never holds a run for longer than that."""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

from basecrawler.formats.dates import utc_now_iso
from basecrawler.store.engines.dialect import dialect_of
from basecrawler.watch import matching, outbox
from basecrawler.watch.channels import atom, mail, webhook
from basecrawler.watch.repository import all_watches, any_watch
from basecrawler.watch.secrets import lookup

log = logging.getLogger("basecrawler.watch")

BUDGET_ENV = "BASECRAWLER_WATCH_BUDGET_S"
DEFAULT_BUDGET_S = 120.0
DIGEST_EVERY_S = 24 * 3600
DEFAULT_SECRET_ENV = "BASECRAWLER_WATCH_SECRET"


@dataclass
class DeliveryReport:
    queued: int = 0
    sent: int = 0
    failed: int = 0            # given up for good in this pass
    retrying: int = 0
    errors: list = field(default_factory=list)

    def line(self) -> str:
        return (f"watches: {self.queued} queued, {self.sent} delivered, {self.retrying} to retry, "
                f"{self.failed} failed")


def budget_s() -> float:
    try:
        return float(os.environ.get(BUDGET_ENV) or DEFAULT_BUDGET_S)
    except ValueError:
        return DEFAULT_BUDGET_S


def deliver(store, *, now: str | None = None, transport=None, smtp=None, resolve=None,
            monotonic=time.monotonic) -> DeliveryReport:
    """One pass over every watch (see the module doc)."""
    now = now or utc_now_iso()
    report = DeliveryReport()
    report.queued = matching.match(store, now=now).queued
    matching.release_held(store, now=now)
    ends = monotonic() + budget_s()
    for watch in all_watches(store):
        if monotonic() >= ends:
            log.warning("watches: delivery budget of %.0f s spent; the rest stays pending", budget_s())
            break
        try:
            _deliver_watch(store, watch, now, report, transport=transport, smtp=smtp, resolve=resolve,
                           ends=ends, monotonic=monotonic)
        except Exception as exc:   # one watch's channel failing never stops the others
            report.errors.append(f"{watch.name}: {type(exc).__name__}: {exc}")
            log.warning("watch %s: delivery failed: %s: %s", watch.name, type(exc).__name__, exc)
    if watch_feed_needed(store):
        atom.write(store, None, atom.render(None, outbox.recent(store, None), now=now))
    return report


def watch_feed_needed(store) -> bool:
    return any_watch(store)


def _deliver_watch(store, watch, now, report, *, transport, smtp, resolve, ends, monotonic) -> None:
    if watch.channel == "mail" and watch.digest:
        d = dialect_of(store)
        last = store.scalar(d.query(f"SELECT MAX(sent_at) FROM watch_outbox WHERE watch_id = {d.p} AND state = 'sent'"),
                            [watch.id])
        import datetime as dt
        if last and (dt.datetime.fromisoformat(now) - dt.datetime.fromisoformat(last)).total_seconds() < DIGEST_EVERY_S:
            return
    rows = outbox.claim(store, watch.id, now=now)
    if watch.channel == "feed":
        atom.write(store, watch.name, atom.render(watch.name, outbox.recent(store, watch.id), now=now))
        outbox.sent(store, [r["id"] for r in rows], now=now)
        report.sent += len(rows)
        return
    if not rows:
        return
    if watch.channel == "mail":
        smtp = smtp or mail.settings_from_env()
        batches = [rows] if watch.digest else [[r] for r in rows]
        for number, batch in enumerate(batches):
            if monotonic() >= ends:
                outbox.release(store, [r["id"] for b in batches[number:] for r in b])
                return
            problem = mail.send(smtp, mail.compose(batch, watch.name, watch.target, smtp.sender))
            _settle(store, batch, problem, False, now, report, watch.name)
        return
    key = lookup(watch.options.get("secret_env") or DEFAULT_SECRET_ENV, watch.options.get("secret_file"))
    extra = {"resolve": resolve} if resolve else {}
    for number, row in enumerate(rows):
        if monotonic() >= ends:
            outbox.release(store, [r["id"] for r in rows[number:]])
            return
        result = webhook.send(watch.target, row, watch.name, key, transport=transport, **extra)
        _settle(store, [row], result.error if not result.ok else None, result.final, now, report, watch.name)


def _settle(store, rows, problem, final, now, report, name) -> None:
    if problem is None:
        outbox.sent(store, [r["id"] for r in rows], now=now)
        report.sent += len(rows)
        return
    for row in rows:
        state = outbox.failed(store, row, problem, now=now, final=final)
        if state == "failed":
            report.failed += 1
            log.error("watch %s: delivery %s given up: %s", name, row["delivery_id"], problem)
        else:
            report.retrying += 1
            log.warning("watch %s: delivery %s failed, will retry: %s", name, row["delivery_id"], problem)


def deliver_after_run(store, settings=None, stop=None) -> str | None:
    """After a run or a translation batch: one pass when there are watches. Never raises and
    never changes what the run reports."""
    try:
        if stop is not None and stop.is_set() or not any_watch(store):
            return None
        report = deliver(store)
        log.info(report.line())
        return report.line()
    except Exception as exc:
        log.warning("watches: delivery pass failed (the notifications stay queued): %s: %s", type(exc).__name__, exc)
        return None
