"""Several machines on one store (issue #21 point 10): `schedule --source ID …` runs only those
sources, and jobs of different selections never make each other skip (on PostgreSQL, where
the machines meet, and on SQLite)."""
from __future__ import annotations

import datetime as dt

import pytest

from basecrawler.cli import main
from basecrawler.errors import UnknownSource
from basecrawler.operations.scheduler import (SchedulePlan, catch_up_run_times, daemon_lock, job_lock, run_scheduled_job,
                                   select_sources)
from basecrawler.testing import fast_settings
from pgcluster import any_db, pg_cluster, pg_url  # noqa: F401  (fixtures)
from support import ItemsCrawler


def _source(source_id: str, journal: list):
    class Demo(ItemsCrawler):
        source = source_id
        country = source_id.upper()

        def fetch(self):
            journal.append(source_id)
            yield {"id": f"{source_id}-1"}

        def parse(self, raw):
            return {"recall_number": raw["id"], "recall_date": "2024-05-01"}
    return Demo


@pytest.fixture
def journal():
    return []


@pytest.fixture
def crawlers(journal):
    return {sid: _source(sid, journal) for sid in ("aa", "bb", "cc")}


def test_a_job_with_sources_runs_only_those(any_db, crawlers, journal):  # noqa: F811
    report = run_scheduled_job(fast_settings(any_db), crawlers=crawlers, sources=["cc", "aa"], translate=False)
    assert report.ok and journal == ["aa", "cc"]   # in the registry's order


def test_an_unknown_source_is_a_usage_error_naming_the_known_ones(crawlers):
    with pytest.raises(UnknownSource, match="known sources: aa, bb, cc"):
        select_sources(crawlers, ["aa", "zz"])


def test_machines_running_different_sources_never_skip_each_other(any_db, crawlers, journal):  # noqa: F811
    settings = fast_settings(any_db)
    machine_a = job_lock(any_db, ["aa"])   # machine A's job is running right now
    assert machine_a.try_acquire()
    try:
        other = run_scheduled_job(settings, crawlers=crawlers, sources=["bb"], translate=False)
        assert other.skipped is None and journal == ["bb"]
        same = run_scheduled_job(settings, crawlers=crawlers, sources=["aa"], translate=False)
        assert same.skipped and "another scheduled job" in same.skipped
        everything = job_lock(any_db)
        assert everything.try_acquire()   # the all-sources lock is a third, separate one
        everything.release()
    finally:
        machine_a.release()
    daemon_a, daemon_b = daemon_lock(any_db, ["aa"]), daemon_lock(any_db, ["bb"])
    try:
        assert daemon_a.try_acquire() and daemon_b.try_acquire()
    finally:
        daemon_a.release()
        daemon_b.release()


def test_catch_up_looks_at_the_last_job_of_its_own_selection(any_db, crawlers):  # noqa: F811
    from basecrawler import Store
    run_scheduled_job(fast_settings(any_db), crawlers=crawlers, sources=["aa"], translate=False)
    store = Store(any_db)
    try:
        assert store.get_meta("scheduler.last_job.aa.incremental") is not None
        assert store.get_meta("scheduler.last_job.incremental") is None   # not every source's job
        plan = SchedulePlan(at="06:00", tz="UTC", full_day=None)
        now = dt.datetime(2026, 1, 5, 7, 0, tzinfo=dt.timezone.utc)
        store.set_meta("scheduler.last_job.aa.incremental", "2026-01-05T06:30:00+00:00")
        assert catch_up_run_times(plan, store, now, sources=["aa"]) == {}      # machine A ran after 06:00
        assert list(catch_up_run_times(plan, store, now, sources=["bb"])) == ["daily-incremental"]  # B did not
    finally:
        store.close()


def test_schedule_once_with_sources_from_the_command_line(tmp_path, crawlers, journal, monkeypatch, capsys):
    import basecrawler.pipeline.registry
    monkeypatch.setattr(basecrawler.pipeline.registry, "discover", lambda *a, **k: crawlers)
    db = str(tmp_path / "store.db")
    assert main(["--db", db, "schedule", "--once", "--no-translate", "--source", "bb", "--source", "cc"]) == 0
    assert journal == ["bb", "cc"]
    assert main(["--db", db, "schedule", "--once", "--source", "nope"]) == 2
    assert "unknown source 'nope'" in capsys.readouterr().err


def test_a_job_whose_database_is_unreachable_is_skipped_in_one_line(crawlers, journal, caplog, monkeypatch):
    import socket
    monkeypatch.setenv("BASECRAWLER_PG_CONNECT_TIMEOUT_S", "2")
    with socket.socket() as closed:   # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        url = f"postgresql://crawler:s3cret@127.0.0.1:{closed.getsockname()[1]}/recalls"
    settings = fast_settings(url)
    report = run_scheduled_job(settings, crawlers=crawlers, translate=False)
    assert not report.ok and report.skipped.startswith("database unreachable") and journal == []
    assert "s3cret" not in report.skipped + caplog.text
    assert not any(r.exc_info for r in caplog.records)
