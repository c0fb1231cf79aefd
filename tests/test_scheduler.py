"""The daily scheduler: the job (all sources isolated, then translation), its lock, the
APScheduler configuration (coalesce, one instance, misfire grace), recorded errors and next
fire time, `schedule --once / --print`, and a clean stop on SIGTERM."""
import datetime as dt
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest
from apscheduler.schedulers.background import BackgroundScheduler

from basecrawler import BaseCrawler, Store
from basecrawler.cli import main
from basecrawler.errors import ConfigError
from conftest import subprocess_env
from basecrawler.operations.scheduler import (DAILY_JOB, META_LAST_JOB, META_NEXT_RUN, WEEKLY_FULL_JOB, SchedulePlan,
                                   build_scheduler, catch_up_run_times, run_forever, run_scheduled_job,
                                   stored_errors)

REPO = Path(__file__).resolve().parents[1]
UTC = dt.timezone.utc


# ---- demo sources ----------------------------------------------------------------------------
def make_source(source_id, journal, *, fetch_error=None, init_error=None, gate=None):
    """A tiny crawler class that notes in `journal` when it runs (and in which mode)."""

    class Demo(BaseCrawler):
        source = source_id
        country = source_id.upper()[:2]
        source_lang = "en"
        endpoints = {"site": "https://demo.example"}

        def __init__(self, *args, **kwargs):
            if init_error:
                raise init_error
            super().__init__(*args, **kwargs)

        def fetch(self):
            journal.append((source_id, self.mode))
            if gate is not None:
                gate["started"].set()
                gate["release"].wait(10)
            if fetch_error:
                raise fetch_error
            yield {"id": f"{source_id}-1"}

        def parse(self, raw):
            return {"recall_number": raw["id"], "recall_date": "2024-05-01", "summary_original": "Brake hose"}

    Demo.__name__ = f"Demo_{source_id}"
    return Demo


@pytest.fixture
def translation(monkeypatch):
    """The real translation job hook (translate.jobhook) with stand-ins for the backend and the
    worker that note when they are called."""
    import translate.backends
    import translate.jobhook
    import translate.worker

    calls = []

    class Report:
        backend_down = False

        def summary_line(self):
            return "translated 1 record"

    def translate_pending(store, backend, *, limit=None, stop=None):
        calls.append(("translate", backend))
        return Report()

    backends = types.SimpleNamespace(backend_from_env=lambda: "fake-backend")
    monkeypatch.setattr(translate.backends, "backend_from_env", lambda: backends.backend_from_env())
    monkeypatch.setattr(translate.worker, "translate_pending", translate_pending)
    monkeypatch.setattr("basecrawler.operations.schedulejob.job_hooks",
                        lambda: {"translate": translate.jobhook.translate_after_job})
    return types.SimpleNamespace(calls=calls, backends=backends, report=Report)


# ---- the job ---------------------------------------------------------------------------------
def test_job_runs_every_source_then_translation(settings, translation):
    journal = translation.calls
    crawlers = {"aa": make_source("aa", journal), "bb": make_source("bb", journal)}
    report = run_scheduled_job(settings, mode="incremental", crawlers=crawlers)
    assert journal == [("aa", "incremental"), ("bb", "incremental"), ("translate", "fake-backend")]
    assert report.ok and [r.status for r in report.results] == ["succeeded", "succeeded"]
    assert report.translation == "translated 1 record"


def test_job_passes_the_full_mode_to_every_source(settings, translation):
    journal = []
    run_scheduled_job(settings, mode="full", crawlers={"aa": make_source("aa", journal)})
    assert journal == [("aa", "full")]


def test_failing_sources_do_not_stop_the_others(settings, translation):
    journal = translation.calls
    crawlers = {
        "aa": make_source("aa", journal, fetch_error=RuntimeError("listing vanished")),
        "bb": make_source("bb", journal, init_error=RuntimeError("cannot even start")),
        "cc": make_source("cc", journal),
    }
    report = run_scheduled_job(settings, crawlers=crawlers)
    assert ("cc", "incremental") in journal and journal[-1][0] == "translate"
    assert not report.ok and sorted(report.failed_sources) == ["aa", "bb"]
    store = Store(settings.db_path)
    try:
        assert store.lookup.get("vehicle_recall", {"country": "CC", "recall_number": "cc-1"}) is not None
    finally:
        store.close()


def test_no_translation_backend_skips_translation(settings, translation):
    translation.backends.backend_from_env = lambda: None
    report = run_scheduled_job(settings, crawlers={"aa": make_source("aa", [])})
    assert translation.calls == [] and report.ok
    assert "no translation backend" in report.translation


def test_translation_failure_is_logged_and_does_not_fail_the_sources(settings, translation, caplog):
    def broken(store, backend, *, limit=None, stop=None):
        raise RuntimeError("worker crashed")

    sys.modules["translate.worker"].translate_pending = broken
    with caplog.at_level(logging.ERROR, logger="basecrawler.operations.scheduler"):
        report = run_scheduled_job(settings, crawlers={"aa": make_source("aa", [])})
    assert report.translation_failed and "worker crashed" in report.translation
    assert [r.status for r in report.results] == ["succeeded"]
    assert any("worker crashed" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)


def test_job_report_is_recorded_in_the_store(settings, translation):
    run_scheduled_job(settings, crawlers={"aa": make_source("aa", [])})
    store = Store(settings.db_path)
    try:
        last = json.loads(store.get_meta(META_LAST_JOB))
    finally:
        store.close()
    assert last["sources"] == {"aa": "succeeded"} and last["ok"] is True and last["finished_at"]


def test_second_instance_does_not_run_the_job_concurrently(settings, translation):
    gate = {"started": threading.Event(), "release": threading.Event()}
    first_journal, second_journal = [], []
    first = threading.Thread(target=run_scheduled_job, args=(settings,),
                             kwargs={"crawlers": {"aa": make_source("aa", first_journal, gate=gate)}})
    first.start()
    try:
        assert gate["started"].wait(10)
        second = run_scheduled_job(settings, crawlers={"bb": make_source("bb", second_journal)})
    finally:
        gate["release"].set()
        first.join(10)
    assert second.skipped and "another scheduled job is running" in second.skipped
    assert second_journal == [] and not second.ok
    # Once the first job is done the lock is free again.
    assert run_scheduled_job(settings, crawlers={"bb": make_source("bb", second_journal)}).ok


# ---- the plan --------------------------------------------------------------------------------
def test_full_run_replaces_the_daily_run_on_its_day():
    plan = SchedulePlan(at="06:00", tz="Asia/Seoul", full_day="sun")
    week = plan.upcoming(7, now=dt.datetime(2024, 6, 3, 7, 0, tzinfo=UTC))   # a Monday
    assert [(t.strftime("%a %H:%M"), mode) for t, _, mode in week] == [
        ("Tue 06:00", "incremental"), ("Wed 06:00", "incremental"), ("Thu 06:00", "incremental"),
        ("Fri 06:00", "incremental"), ("Sat 06:00", "incremental"), ("Sun 06:00", "full"),
        ("Mon 06:00", "incremental")]
    assert all(str(t.tzinfo) == "Asia/Seoul" for t, _, _ in week)


def test_plan_reads_time_and_zone_from_the_environment(monkeypatch):
    monkeypatch.setenv("BASECRAWLER_SCHEDULE_AT", "05:30")
    monkeypatch.setenv("BASECRAWLER_SCHEDULE_TZ", "Asia/Tokyo")
    plan = SchedulePlan.from_env(full_day="Wednesday")
    assert (plan.at, plan.tz, plan.full_day) == ("05:30", "Asia/Tokyo", "wed")
    assert SchedulePlan.from_env(at="07:15").at == "07:15"       # a flag beats the environment


@pytest.mark.parametrize("bad", [{"at": "25:00"}, {"at": "6am"}, {"tz": "Mars/Olympus"}, {"full_day": "someday"}])
def test_bad_schedule_settings_are_config_errors(bad):
    with pytest.raises(ConfigError):
        SchedulePlan(**bad)


# ---- APScheduler configuration and misfires ---------------------------------------------------
def _plan_firing(ago: dt.timedelta, **kw) -> tuple[SchedulePlan, dt.datetime]:
    """A daily plan whose latest fire time lies `ago` in the past (UTC), and that time."""
    fire = (dt.datetime.now(UTC) - ago).replace(second=0, microsecond=0)
    return SchedulePlan(at=f"{fire:%H:%M}", tz="UTC", full_day=None, **kw), fire


def _wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_jobs_coalesce_allow_one_instance_and_hours_of_grace(settings):
    scheduler = build_scheduler(settings, SchedulePlan(tz="UTC", full_day="sun"), scheduler_class=BackgroundScheduler)
    scheduler.start(paused=True)
    try:
        jobs = {job.id: job for job in scheduler.get_jobs()}
        assert set(jobs) == {DAILY_JOB, WEEKLY_FULL_JOB}
        for job in jobs.values():
            assert job.coalesce is True and job.max_instances == 1
            assert job.misfire_grace_time >= 3600
        assert jobs[WEEKLY_FULL_JOB].kwargs == {"mode": "full"}
    finally:
        scheduler.shutdown(wait=False)


def test_overdue_job_within_grace_runs_once(settings):
    # Asleep for three days: three daily fire times passed, all inside the grace window.
    # coalesce folds them into one run; without it the job would run three or four times.
    plan, fire = _plan_firing(dt.timedelta(minutes=30), misfire_grace_s=5 * 86400)
    calls = []
    scheduler = build_scheduler(settings, plan, job=lambda settings, mode: calls.append(mode),
                                scheduler_class=BackgroundScheduler,
                                first_run_times={DAILY_JOB: fire - dt.timedelta(days=3)})
    scheduler.start()
    try:
        assert _wait_for(lambda: calls)
        time.sleep(0.5)
    finally:
        scheduler.shutdown(wait=True)
    assert calls == ["incremental"]


def _errors_after_first_fire(scheduler, settings, caplog) -> list[dict]:
    """Start the scheduler, wait until it has stored an error, stop it; the stored errors."""
    store = Store(settings.db_path)
    with caplog.at_level(logging.ERROR, logger="basecrawler.operations.scheduler"):
        scheduler.start()
        try:
            assert _wait_for(lambda: stored_errors(store))
        finally:
            scheduler.shutdown(wait=True)
    errors = stored_errors(store)
    store.close()
    return errors


def test_job_later_than_grace_is_missed_recorded_and_logged(settings, caplog):
    plan, fire = _plan_firing(dt.timedelta(hours=2), misfire_grace_s=3600)
    calls = []
    scheduler = build_scheduler(settings, plan, job=lambda settings, mode: calls.append(mode),
                                scheduler_class=BackgroundScheduler, first_run_times={DAILY_JOB: fire})
    errors = _errors_after_first_fire(scheduler, settings, caplog)
    assert calls == []
    assert errors[0]["kind"] == "missed" and errors[0]["job"] == DAILY_JOB
    assert any("missed" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)


def test_job_exception_is_recorded_and_logged(settings, caplog):
    plan, fire = _plan_firing(dt.timedelta(minutes=1))

    def exploding(settings, mode):
        raise RuntimeError("database on fire")

    scheduler = build_scheduler(settings, plan, job=exploding, scheduler_class=BackgroundScheduler,
                                first_run_times={DAILY_JOB: fire})
    errors = _errors_after_first_fire(scheduler, settings, caplog)
    assert errors[0]["kind"] == "error" and "database on fire" in errors[0]["detail"]
    assert any("database on fire" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)


def test_next_fire_time_is_recorded_for_status(settings):
    plan = SchedulePlan(at="06:00", tz="Asia/Seoul", full_day="sun")
    scheduler = build_scheduler(settings, plan, job=lambda settings, mode: None, scheduler_class=BackgroundScheduler)
    scheduler.start()
    try:
        expected = min(job.next_run_time for job in scheduler.get_jobs())
    finally:
        scheduler.shutdown(wait=False)
    store = Store(settings.db_path)
    try:
        recorded = store.get_meta(META_NEXT_RUN)
    finally:
        store.close()
    assert recorded == expected.isoformat()
    assert dt.datetime.fromisoformat(recorded) > dt.datetime.now(UTC)


# ---- catching up on a fire time that passed while no scheduler ran --------------------------
MONDAY_0700 = dt.datetime(2024, 6, 3, 7, 0, tzinfo=UTC)
DAILY_0600 = SchedulePlan(at="06:00", tz="UTC", full_day="sun", misfire_grace_s=3 * 3600)


def test_fire_time_missed_while_not_running_is_caught_up_once(store):
    store.set_meta(f"{META_LAST_JOB}.incremental", "2024-06-02T06:00:05+00:00")
    due = catch_up_run_times(DAILY_0600, store, now=MONDAY_0700)
    assert due == {DAILY_JOB: dt.datetime(2024, 6, 3, 6, 0, tzinfo=UTC)}


def test_no_catch_up_when_the_job_already_ran_after_its_fire_time(store):
    store.set_meta(f"{META_LAST_JOB}.incremental", "2024-06-03T06:00:02+00:00")
    assert catch_up_run_times(DAILY_0600, store, now=MONDAY_0700) == {}


def test_no_catch_up_beyond_the_grace_window(store):
    store.set_meta(f"{META_LAST_JOB}.incremental", "2024-06-01T06:00:05+00:00")
    assert catch_up_run_times(DAILY_0600, store, now=MONDAY_0700 + dt.timedelta(hours=3)) == {}


def test_scheduler_started_after_a_missed_fire_time_runs_the_job_at_once(settings, store):
    plan, fire = _plan_firing(dt.timedelta(minutes=20))
    store.set_meta(f"{META_LAST_JOB}.incremental", (fire - dt.timedelta(days=1)).isoformat())
    calls = []

    def job(settings, mode):
        calls.append(mode)
        os.kill(os.getpid(), signal.SIGTERM)        # stops run_forever through its own handler

    watchdog = threading.Timer(15, os.kill, args=(os.getpid(), signal.SIGTERM))
    watchdog.start()
    try:
        run_forever(settings, plan, job=job)
    finally:
        watchdog.cancel()
    assert calls == ["incremental"]


def test_job_records_when_each_mode_last_ran(settings, translation):
    run_scheduled_job(settings, mode="full", crawlers={"aa": make_source("aa", [])})
    store = Store(settings.db_path)
    try:
        assert store.get_meta(f"{META_LAST_JOB}.full") and store.get_meta(f"{META_LAST_JOB}.incremental") is None
    finally:
        store.close()


# ---- the command -----------------------------------------------------------------------------
@pytest.fixture
def registry(monkeypatch, translation):
    journal = translation.calls
    sources = {}
    monkeypatch.setattr("basecrawler.pipeline.registry.discover", lambda *a, **k: dict(sources))
    return types.SimpleNamespace(sources=sources, journal=journal)


def test_once_runs_the_job_and_exits_0(registry, db_path):
    registry.sources.update(aa=make_source("aa", registry.journal), bb=make_source("bb", registry.journal))
    assert main(["--db", db_path, "schedule", "--once"]) == 0
    assert [entry[0] for entry in registry.journal] == ["aa", "bb", "translate"]


def test_once_exits_1_when_a_source_failed(registry, db_path):
    registry.sources.update(aa=make_source("aa", registry.journal, fetch_error=RuntimeError("down")),
                            bb=make_source("bb", registry.journal))
    assert main(["--db", db_path, "schedule", "--once"]) == 1
    assert ("bb", "incremental") in registry.journal


def test_print_shows_next_fire_times(db_path, capsys):
    assert main(["--db", db_path, "schedule", "--print", "--at", "06:00", "--tz", "Asia/Seoul",
                 "--full-day", "sun"]) == 0
    out = capsys.readouterr().out
    assert "every day at 06:00 Asia/Seoul" in out
    lines = [line for line in out.splitlines() if line.startswith("  ")]
    assert len(lines) == 8 and all("06:00 KST" in line for line in lines)
    assert any(line.rstrip().endswith("full") and " Sun " in line for line in lines)


def _start_daemon(db_path, *extra):
    """A real `schedule` process that never runs a job while the test lasts, at any hour: its
    daily time is twelve hours away and the last job is recorded as just done (no catch-up)."""
    now = dt.datetime.now(UTC)
    store = Store(db_path)
    try:
        store.set_meta(f"{META_LAST_JOB}.incremental", now.isoformat())
        store.set_meta(f"{META_LAST_JOB}.full", now.isoformat())
    finally:
        store.close()
    at = (now + dt.timedelta(hours=12)).strftime("%H:%M")
    return subprocess.Popen([sys.executable, "-m", "basecrawler", "--db", db_path, "schedule", "--at", at,
                             "--tz", "UTC", "--grace-hours", "1", *extra], cwd=REPO, env=subprocess_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_until_scheduling(db_path, process):
    def recorded():
        assert process.poll() is None, process.communicate()
        if not os.path.exists(db_path):
            return False
        store = Store(db_path)
        try:
            return store.get_meta(META_NEXT_RUN) is not None
        finally:
            store.close()
    assert _wait_for(recorded, timeout=30)


def test_scheduler_process_stops_cleanly_on_sigterm(db_path):
    process = _start_daemon(db_path)
    try:
        _wait_until_scheduling(db_path, process)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert "SIGTERM received" in err


def test_second_scheduler_process_refuses_to_start(db_path):
    first = _start_daemon(db_path)
    try:
        _wait_until_scheduling(db_path, first)
        second = _start_daemon(db_path)
        out, err = second.communicate(timeout=30)
        assert second.returncode == 1
        assert "already running" in out
    finally:
        first.send_signal(signal.SIGTERM)
        try:
            first.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            first.kill()


def _unreachable_source(source_id, port):
    class Unreachable(BaseCrawler):
        source = source_id
        country = source_id.upper()[:2]
        endpoints = {"site": f"http://127.0.0.1:{port}"}   # nothing listens: connection refused

        def fetch(self):
            yield self.http.get_json(self.url("site", "/list"))

        def parse(self, raw):
            return None
    return Unreachable


def test_once_with_every_source_unreachable_ends_on_the_offline_hint(registry, db_path, capsys, monkeypatch):
    import socket
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    registry.sources.update(un=_unreachable_source("un", port), u2=_unreachable_source("u2", port))
    monkeypatch.setenv("BASECRAWLER_LAUNCHER", "scripts/run")   # as scripts/run exports it
    assert main(["--db", db_path, "schedule", "--once"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert "schedule: incremental run done" in "\n".join(lines[:-1])   # the job's closing line came first
    assert lines[-1].endswith("every source was unreachable (offline?); to fill the store from the recorded "
                              "replay set instead, type: scripts/run --replay"), lines[-3:]
    assert sum("every source was unreachable" in line for line in lines) == 1
