"""One scheduled job: every (selected) source through the one runner, then the job hooks (the
translation worker), under the job's lock; and what the schedule records in the store's meta
(the last job per mode, job errors and misses) and reads back to catch up on missed runs."""
from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from basecrawler.config import Settings
from basecrawler.formats.dates import utc_now_iso
from basecrawler.errors import CrawlerError, UnknownSource
from basecrawler.operations.scheduleplan import SchedulePlan
from basecrawler.pipeline.runlock import RunLock
from basecrawler.pipeline.runner import RunSummary, job_hooks, run_sources
from basecrawler.store.core import Store

log = logging.getLogger("basecrawler.operations.scheduler")   # one logger for the schedule, as before its split

MAX_STORED_ERRORS = 20

META_NEXT_RUN = "scheduler.next_run"
META_LAST_JOB = "scheduler.last_job"
META_ERRORS = "scheduler.errors"


@dataclass
class JobReport:
    mode: str
    started_at: str
    finished_at: str | None = None
    summary: RunSummary = field(default_factory=RunSummary)  # the sources, from the one runner
    translation: str | None = None                       # hooks' outcome lines, or why they were skipped
    translation_failed: bool = False
    skipped: str | None = None                           # why the whole job did not run
    scope: str = ""                                      # "" (every source) or ".eu+us" (scheduler.scope)

    @property
    def results(self) -> list:
        return self.summary.results

    @property
    def crashed(self) -> dict:
        return self.summary.crashed

    @property
    def failed_sources(self) -> list[str]:
        return self.summary.failed_sources

    @property
    def ok(self) -> bool:
        return self.skipped is None and self.summary.ok

    def as_dict(self) -> dict:
        return {
            "mode": self.mode, "started_at": self.started_at, "finished_at": self.finished_at,
            "ok": self.ok, "skipped": self.skipped, "sources": self.summary.statuses(),
            "translation": self.translation,
        }


def scope(sources: Iterable[str] | None) -> str:
    """What names a job's locks and records: "" for every source, ".eu+us" for a selection."""
    return "." + "+".join(sorted(set(sources))) if sources else ""


def select_sources(crawlers: Mapping[str, type], sources: Iterable[str] | None) -> dict[str, type]:
    """The crawlers of `sources` (in the registry's order), all of them when None; an unknown
    id is a usage error naming the known ones."""
    if not sources:
        return dict(crawlers)
    for source_id in sources:
        if source_id not in crawlers:
            raise UnknownSource(source_id, sorted(crawlers))
    return {source_id: cls for source_id, cls in crawlers.items() if source_id in set(sources)}


def job_lock(db_path: str, sources: Iterable[str] | None = None) -> RunLock:
    """`<db>.schedule.lock` (`<db>.<selection>.schedule.lock`): held while a scheduled job runs,
    in whichever process runs it."""
    lock = RunLock(db_path)
    if lock.path is not None:
        lock.path = lock.path.with_name(Path(db_path).name + scope(sources) + ".schedule.lock")
    return lock


def daemon_lock(db_path: str, sources: Iterable[str] | None = None) -> RunLock:
    """`<db>.scheduler.lock` (`<db>.<selection>.scheduler.lock`): held for the lifetime of a
    `schedule` process."""
    lock = RunLock(db_path)
    if lock.path is not None:
        lock.path = lock.path.with_name(Path(db_path).name + scope(sources) + ".scheduler.lock")
    return lock


def run_scheduled_job(settings: Settings, *, mode: str = "incremental",
                      crawlers: Mapping[str, type] | None = None, translate: bool = True,
                      stop: threading.Event | None = None, sources: Iterable[str] | None = None) -> JobReport:
    """Every source in `mode` through the one runner (`runner.run_sources`), then the job hooks
    (the translation worker registers one); `translate=False` skips the hooks.

    `crawlers` maps source id → crawler class (default: the registry); `sources` keeps only
    those ids (UnknownSource for one that is not there)."""
    sources = sorted(set(sources)) if sources else None
    report = JobReport(mode=mode, started_at=utc_now_iso(), scope=scope(sources))
    lock = job_lock(settings.db_path, sources)
    try:
        if not lock.try_acquire():
            return _skipped(report, f"another scheduled job is running (pid {lock.holder_pid()})", logging.WARNING)
    except CrawlerError as exc:   # PostgreSQL unreachable (its lock lives there): the next job tries again
        return _skipped(report, f"database unreachable: {exc}", logging.ERROR)
    try:
        if crawlers is None:
            from basecrawler.pipeline.registry import discover

            crawlers = discover()
        crawlers = select_sources(crawlers, sources)
        log.info("schedule: %s run of %d sources: %s", mode, len(crawlers), ", ".join(crawlers) or "(none)")
        try:
            store = Store(settings.db_path)
        except CrawlerError as exc:
            return _skipped(report, f"database unreachable: {exc}", logging.ERROR)
        try:
            # The offline hint is what to type next, so it comes after this job's closing line.
            report.summary = run_sources(crawlers, settings=settings, mode=mode, stop=stop, store=store,
                                         hint_offline=False)
            if stop is not None and stop.is_set():
                report.translation = "skipped: stop requested"
            elif translate:
                _run_hooks(store, settings, report, stop)
                from basecrawler.watch.delivery import deliver_after_run   # what the translation filled in Korean
                deliver_after_run(store, settings, stop)
            report.finished_at = utc_now_iso()
            _record_job(store, report)
        finally:
            store.close()
    finally:
        lock.release()
    level = logging.INFO if report.ok else logging.ERROR
    log.log(level, "schedule: %s run done: %s%s", mode, report.summary.summary_line(),
            f"; translation: {report.translation}" if report.translation else "")
    if report.summary.all_unreachable:
        from basecrawler.fetch.replay import offline_hint
        log.error(offline_hint(settings.db_path))
    return report


def _skipped(report: JobReport, why: str, level: int) -> JobReport:
    report.skipped, report.finished_at = why, utc_now_iso()
    log.log(level, "schedule: %s; this %s run is skipped", why, report.mode)
    return report


def _run_hooks(store: Store, settings: Settings, report: JobReport, stop) -> None:
    hooks = job_hooks()
    if not hooks:
        report.translation = "skipped: no job hook registered (translation package not installed)"
        log.warning("schedule: %s", report.translation)
        return
    outcomes = []
    for name, hook in hooks.items():
        try:
            outcomes.append(str(hook(store, settings=settings, stop=stop)))
        except Exception as exc:  # a failing hook is logged; the crawl it follows stands
            report.translation_failed = True
            outcomes.append(f"failed: {type(exc).__name__}: {exc}")
            log.error("schedule: job hook %s failed: %s", name, exc, exc_info=True)
    report.translation = "; ".join(outcomes)


def _record_job(store: Store, report: JobReport) -> None:
    try:
        store.set_meta(META_LAST_JOB, json.dumps(report.as_dict(), ensure_ascii=False))
        store.set_meta(f"{META_LAST_JOB}{report.scope}.{report.mode}", report.started_at)
    except Exception as exc:
        log_failure("schedule: could not record the job report", exc)


def record_scheduler_error(db_path: str, entry: dict) -> None:
    """Append one job error / missed run to `scheduler.errors` in meta (newest last, bounded)."""
    store = Store(db_path)
    try:
        current = store.get_meta(META_ERRORS)
        errors = json.loads(current) if current else []
        errors = (errors + [entry])[-MAX_STORED_ERRORS:]
        store.set_meta(META_ERRORS, json.dumps(errors, ensure_ascii=False))
    finally:
        store.close()


def stored_errors(store: Store) -> list[dict]:
    current = store.get_meta(META_ERRORS)
    return json.loads(current) if current else []


def catch_up_run_times(plan: SchedulePlan, store: Store, now: dt.datetime | None = None,
                       sources: Iterable[str] | None = None) -> dict[str, dt.datetime]:
    """Fire times a scheduler that was not running (machine off, process restarted) missed.

    APScheduler's memory job store forgets a fire time that passed while no scheduler ran, so
    the grace window only covers a sleeping process. Here a job whose latest fire time is within
    the grace window and later than the last job of its mode is given that time as its first
    run time: it then runs once at start, through the same misfire rules."""
    now = now or dt.datetime.now(dt.timezone.utc)
    due = {}
    for job_id, (mode, fired) in plan.previous_fire_times(now).items():
        if (now - fired).total_seconds() > plan.misfire_grace_s:
            continue
        last = store.get_meta(f"{META_LAST_JOB}{scope(sources)}.{mode}")
        if last is None or dt.datetime.fromisoformat(last) < fired:
            due[job_id] = fired
    return due


def log_failure(what: str, exc: Exception) -> None:
    """ERROR with the cause; a traceback only for an unclassified error (a lost database is one
    line, not a stack)."""
    log.error("%s: %s: %s", what, type(exc).__name__, exc, exc_info=not isinstance(exc, CrawlerError))
