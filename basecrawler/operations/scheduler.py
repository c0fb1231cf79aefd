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

The plan (when jobs fire) is `scheduleplan`, the job and what it records `schedulejob`; this
module runs them on APScheduler.
"""
from __future__ import annotations

import datetime as dt
import logging
import os
import threading
import zoneinfo
from typing import Callable, Iterable, Mapping

from basecrawler.config import Settings
from basecrawler.formats.dates import utc_now_iso
from basecrawler.store.engines import redact
from basecrawler.errors import CrawlerError, SchedulerAlreadyRunning
from basecrawler.operations.scheduleplan import DAILY_JOB, DAYS, WEEKLY_FULL_JOB, SchedulePlan
from basecrawler.operations.schedulejob import (META_ERRORS, META_LAST_JOB, META_NEXT_RUN, JobReport,
                                                catch_up_run_times, daemon_lock, job_lock, log_failure,
                                                record_scheduler_error, run_scheduled_job, scope, select_sources,
                                                stored_errors)
from basecrawler.pipeline.runner import stop_on_signals
from basecrawler.store.core import Store

log = logging.getLogger(__name__)


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
            log_failure("schedule: could not record the next run time", exc)
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
            log_failure("schedule: could not record the job problem", exc)

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

# The scheduler, and (for existing imports) the plan's and the job's names.
__all__ = ["SchedulePlan", "JobReport", "run_scheduled_job", "build_scheduler", "run_forever",
           "record_scheduler_error", "stored_errors", "job_lock", "daemon_lock", "SchedulerAlreadyRunning",
           "select_sources", "scope", "catch_up_run_times",
           "DAILY_JOB", "WEEKLY_FULL_JOB", "DAYS", "META_NEXT_RUN", "META_LAST_JOB", "META_ERRORS"]
