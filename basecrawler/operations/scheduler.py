"""The daily schedule: every source incrementally each day at a set time, a weekly full run,
then the translation worker; job errors and the next fire time recorded in the store.

APScheduler 3.x drops a late job after one second by default and swallows job exceptions, so
every job here is added with `coalesce=True`, `max_instances=1` and a misfire grace of hours
(a machine asleep at 06:00 runs the job once when it wakes, never twice), and a listener on
EVENT_JOB_ERROR | EVENT_JOB_MISSED logs at ERROR and stores what happened. One worker thread
runs jobs one after the other, and a lock file next to the database (`<db>.schedule.lock`)
keeps a second scheduler process (or a `schedule --once`) from running a job at the same time.

Several machines can share one PostgreSQL store, each running its own sources
(`schedule --source us --source eu` here, `--source jp` there): the job's locks and its
catch-up record are per selection of sources, so one machine's job never makes another's skip,
while a source is still never crawled twice at once (the per-source run lock).
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import os
import threading
import zoneinfo
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping

from basecrawler.config import Settings, env_value
from basecrawler.formats.dates import utc_now_iso
from basecrawler.store.engines import redact
from basecrawler.errors import ConfigError, CrawlerError, SchedulerAlreadyRunning, UnknownSource
from basecrawler.pipeline.runlock import RunLock
from basecrawler.pipeline.runner import RunSummary, job_hooks, run_sources, stop_on_signals
from basecrawler.store.core import Store

log = logging.getLogger(__name__)

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DAILY_JOB, WEEKLY_FULL_JOB = "daily-incremental", "weekly-full"
MAX_STORED_ERRORS = 20

META_NEXT_RUN = "scheduler.next_run"
META_LAST_JOB = "scheduler.last_job"
META_ERRORS = "scheduler.errors"


# ---- configuration ---------------------------------------------------------------------------
@dataclass(frozen=True)
class SchedulePlan:
    """When jobs fire: daily `at` (HH:MM) in `tz`, a full run instead on `full_day`."""

    at: str = "06:00"
    tz: str = "UTC"
    full_day: str | None = "sun"        # None: no weekly full run
    misfire_grace_s: int = 12 * 3600

    def __post_init__(self):
        hour_minute = self.at.split(":")
        if len(hour_minute) != 2 or not all(p.isdigit() for p in hour_minute) \
                or not (0 <= int(hour_minute[0]) < 24 and 0 <= int(hour_minute[1]) < 60):
            raise ConfigError(f"schedule time must be HH:MM (24 h), not {self.at!r}")
        try:
            zoneinfo.ZoneInfo(self.tz)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"unknown time zone {self.tz!r} (use an IANA name such as Asia/Seoul)") from None
        if self.full_day is not None and self.full_day not in DAYS:
            raise ConfigError(f"full-run day must be one of {', '.join(DAYS)}, not {self.full_day!r}")
        if self.misfire_grace_s <= 0:
            raise ConfigError("misfire grace must be positive")

    @property
    def hour(self) -> int:
        return int(self.at.split(":")[0])

    @property
    def minute(self) -> int:
        return int(self.at.split(":")[1])

    @classmethod
    def from_env(cls, **overrides) -> "SchedulePlan":
        """Defaults → BASECRAWLER_SCHEDULE_AT / _TZ / _FULL_DAY / _GRACE_HOURS → overrides."""
        values: dict = {"tz": _local_zone_name()}
        for attr, name in (("at", "BASECRAWLER_SCHEDULE_AT"), ("tz", "BASECRAWLER_SCHEDULE_TZ"),
                           ("full_day", "BASECRAWLER_SCHEDULE_FULL_DAY")):
            if env_value(name) is not None:
                values[attr] = env_value(name)
        if env_value("BASECRAWLER_SCHEDULE_GRACE_HOURS") is not None:
            values["misfire_grace_s"] = int(float(env_value("BASECRAWLER_SCHEDULE_GRACE_HOURS")) * 3600)
        values.update({k: v for k, v in overrides.items() if v is not None})
        if isinstance(values.get("full_day"), str):
            values["full_day"] = None if values["full_day"].lower() in ("none", "off", "never") \
                else values["full_day"].lower()[:3]
        return cls(**values)

    def triggers(self) -> dict:
        """Job id → (mode, CronTrigger). On the full day the full run replaces the incremental
        one, so the two never fire together."""
        from apscheduler.triggers.cron import CronTrigger

        tz = zoneinfo.ZoneInfo(self.tz)
        daily_days = ",".join(d for d in DAYS if d != self.full_day)
        plan = {DAILY_JOB: ("incremental", CronTrigger(day_of_week=daily_days, hour=self.hour, minute=self.minute,
                                                        timezone=tz))}
        if self.full_day:
            plan[WEEKLY_FULL_JOB] = ("full", CronTrigger(day_of_week=self.full_day, hour=self.hour,
                                                         minute=self.minute, timezone=tz))
        return plan

    def upcoming(self, count: int = 8, now: dt.datetime | None = None) -> list[tuple[dt.datetime, str, str]]:
        """The next `count` fire times as (time, job id, mode), soonest first."""
        now = now or dt.datetime.now(zoneinfo.ZoneInfo(self.tz))
        found = []
        for job_id, (mode, trigger) in self.triggers().items():
            previous, moment = None, now
            for _ in range(count):
                fire = trigger.get_next_fire_time(previous, moment)
                if fire is None:
                    break
                found.append((fire, job_id, mode))
                previous, moment = fire, fire + dt.timedelta(seconds=1)
        return sorted(found)[:count]

    def previous_fire_times(self, now: dt.datetime) -> dict[str, tuple[str, dt.datetime]]:
        """Job id → (mode, latest fire time at or before `now`)."""
        found = {}
        for job_id, (mode, trigger) in self.triggers().items():
            latest, fire = None, trigger.get_next_fire_time(None, now - dt.timedelta(days=8))
            while fire is not None and fire <= now:
                latest, fire = fire, trigger.get_next_fire_time(fire, fire + dt.timedelta(seconds=1))
            if latest is not None:
                found[job_id] = (mode, latest)
        return found


def _local_zone_name() -> str:
    try:
        import tzlocal  # an APScheduler 3 dependency

        name = str(tzlocal.get_localzone())
        zoneinfo.ZoneInfo(name)
        return name
    except Exception:  # no usable local zone (containers): UTC is a safe, explicit default
        return "UTC"


# ---- the job ---------------------------------------------------------------------------------
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
        _log_failure("schedule: could not record the job report", exc)


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


def _log_failure(what: str, exc: Exception) -> None:
    """ERROR with the cause; a traceback only for an unclassified error (a lost database is one
    line, not a stack)."""
    log.error("%s: %s: %s", what, type(exc).__name__, exc, exc_info=not isinstance(exc, CrawlerError))


# ---- the scheduler ---------------------------------------------------------------------------
def build_scheduler(settings: Settings, plan: SchedulePlan, *, job: Callable[..., JobReport] | None = None,
                    scheduler_class=None, first_run_times: Mapping[str, dt.datetime] | None = None):
    """An APScheduler (BlockingScheduler unless told) with the daily and weekly jobs and the
    listeners that record errors, misses and the next fire time. `job(settings, mode=...)`
    defaults to run_scheduled_job; `first_run_times` overrides a job's first fire time."""
    from apscheduler.events import (EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, EVENT_JOB_MAX_INSTANCES,
                                    EVENT_JOB_MISSED, EVENT_JOB_SUBMITTED, EVENT_SCHEDULER_STARTED)
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.schedulers.blocking import BlockingScheduler

    scheduler_class = scheduler_class or BlockingScheduler
    job = job or run_scheduled_job
    scheduler = scheduler_class(
        timezone=zoneinfo.ZoneInfo(plan.tz),
        # One worker: the weekly full run waits for a daily run still going instead of racing it.
        executors={"default": ThreadPoolExecutor(max_workers=1)},
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": plan.misfire_grace_s},
    )
    for job_id, (mode, trigger) in plan.triggers().items():
        options = {}
        if first_run_times and job_id in first_run_times:
            options["next_run_time"] = first_run_times[job_id]
        scheduler.add_job(job, trigger, args=[settings], kwargs={"mode": mode}, id=job_id,
                          name=f"{mode} run of every source", coalesce=True, max_instances=1,
                          misfire_grace_time=plan.misfire_grace_s, replace_existing=True, **options)

    def record_next_run(_event=None) -> None:
        times = [j.next_run_time for j in scheduler.get_jobs() if j.next_run_time is not None]
        if not times:
            return
        next_run = min(times).isoformat()
        try:
            store = Store(settings.db_path)
            try:
                store.set_meta(META_NEXT_RUN, next_run)
            finally:
                store.close()
        except Exception as exc:
            _log_failure("schedule: could not record the next run time", exc)
        log.info("schedule: next run %s", next_run)

    def record_problem(event) -> None:
        scheduled = getattr(event, "scheduled_run_time", None)
        if event.code == EVENT_JOB_ERROR:
            kind, detail = "error", f"{type(event.exception).__name__}: {event.exception}"
            log.error("schedule: job %s (due %s) failed: %s", event.job_id, scheduled, detail,
                      exc_info=None if isinstance(event.exception, CrawlerError) else
                      (type(event.exception), event.exception, event.exception.__traceback__))
        elif event.code == EVENT_JOB_MISSED:
            kind, detail = "missed", f"not run: more than {plan.misfire_grace_s}s late"
            log.error("schedule: job %s due %s was missed (%s)", event.job_id, scheduled, detail)
        else:
            kind, detail = "max_instances", "skipped: the previous run is still going"
            log.error("schedule: job %s skipped: still running from before", event.job_id)
        entry = {"at": utc_now_iso(), "job": event.job_id, "kind": kind, "detail": detail,
                 "scheduled_run_time": scheduled.isoformat() if hasattr(scheduled, "isoformat") else None}
        try:
            record_scheduler_error(settings.db_path, entry)
        except Exception as exc:
            _log_failure("schedule: could not record the job problem", exc)

    scheduler.add_listener(record_next_run, EVENT_SCHEDULER_STARTED | EVENT_JOB_SUBMITTED | EVENT_JOB_EXECUTED)
    scheduler.add_listener(record_problem, EVENT_JOB_ERROR | EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES)
    return scheduler


def run_forever(settings: Settings, plan: SchedulePlan, *, job: Callable[..., JobReport] | None = None,
                translate: bool = True, sources: Iterable[str] | None = None) -> None:
    """Foreground scheduler until SIGINT / SIGTERM. The first signal stops scheduling and asks a
    running job to stop: its source ends at the next item boundary (run recorded `interrupted`,
    what it stored kept), later sources and the hooks are skipped. A second signal ends the
    process at once. `job(settings, mode=..., stop=...)` defaults to run_scheduled_job; `sources`
    (a selection) is passed on to it."""
    sources = sorted(set(sources)) if sources else None
    lock = daemon_lock(settings.db_path, sources)
    if not lock.try_acquire():
        which = f" of {', '.join(sources)}" if sources else ""
        raise SchedulerAlreadyRunning(f"a scheduler{which} for {redact(settings.db_path)} is already running "
                                      f"(pid {lock.holder_pid()})")
    try:
        store = Store(settings.db_path)
        try:
            catch_up = catch_up_run_times(plan, store, sources=sources)
        finally:
            store.close()
        for job_id, fired in catch_up.items():
            log.info("schedule: %s was due at %s while no scheduler ran; running it now", job_id, fired.isoformat())
        stopping = stop_on_signals()
        stop = stopping.stop
        chosen = job or run_scheduled_job
        job_running = threading.Lock()

        def bound_job(settings, *, mode):
            with job_running:
                if job is None:
                    return chosen(settings, mode=mode, translate=translate, stop=stop, sources=sources)
                return chosen(settings, mode=mode)

        scheduler = build_scheduler(settings, plan, job=bound_job, first_run_times=catch_up)
        # shutdown(wait=False) from a thread: inside the signal handler it would wait on the
        # scheduler's own lock, and wait=True holds that lock while the job's listeners need it.
        stopping.on_stop = lambda: threading.Thread(target=scheduler.shutdown, kwargs={"wait": False},
                                                    daemon=True).start()
        with stopping:
            log.info("schedule: every day at %s %s (incremental)%s; grace %.1f h; pid %d", plan.at, plan.tz,
                     f", {plan.full_day} full" if plan.full_day else "", plan.misfire_grace_s / 3600, os.getpid())
            scheduler.start()
        with job_running:  # a running job ends at its next item boundary (`stop` is set); keep the lock till then
            pass
        log.info("schedule: stopped")
    finally:
        lock.release()


__all__ = ["SchedulePlan", "JobReport", "run_scheduled_job", "build_scheduler", "run_forever",
           "record_scheduler_error", "stored_errors", "job_lock", "daemon_lock", "SchedulerAlreadyRunning",
           "select_sources", "scope",
           "DAILY_JOB", "WEEKLY_FULL_JOB"]
