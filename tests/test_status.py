"""`status` tells freshness (issue 14.7): per source the newest recall date, the last
successful run even after a failure, a stale flag (no success within twice the daily schedule
interval) and the counts of crashed and interrupted runs. The clock is injected."""
import datetime as dt
import json

from basecrawler.cli import main
from basecrawler.commands.status import collect_status
from basecrawler.model import Recall

UTC = dt.timezone.utc
NOW = dt.datetime(2024, 6, 10, 12, 0, tzinfo=UTC)


def _run(store, source, status, finished_at):
    run_id = store.runs.start_run(source, "incremental", "running", 1)
    store.runs.update_run(run_id, status=status, started_at=finished_at, finished_at=finished_at)


def _recall(store, source, number, date):
    store.upsert("vehicle_recall", [Recall.model_validate({"country": "AA", "source_lang": "en", "recall_number": number,
                                                 "recall_date": date})], source=source)


def test_last_success_is_kept_after_a_failure_and_fresh_within_two_days(store):
    _recall(store, "aa", "A-1", "2024-05-01")
    _recall(store, "aa", "A-2", "2024-06-03")
    _run(store, "aa", "succeeded", "2024-06-09T06:00:00+00:00")
    _run(store, "aa", "failed", "2024-06-10T06:00:00+00:00")
    entry = collect_status(store, ["aa"], now=NOW)["sources"]["aa"]
    assert entry["last_run"]["status"] == "failed"
    assert entry["last_success"] == "2024-06-09T06:00:00+00:00"
    assert entry["newest_recall_date"] == "2024-06-03"
    assert entry["stale"] is False


def test_no_success_within_twice_the_interval_is_stale(store):
    _run(store, "aa", "succeeded", "2024-06-08T11:59:00+00:00")   # 48 h 1 min before NOW
    assert collect_status(store, ["aa"], now=NOW)["sources"]["aa"]["stale"] is True
    assert collect_status(store, ["aa"], now=NOW - dt.timedelta(minutes=2))["sources"]["aa"]["stale"] is False


def test_a_source_that_never_succeeded_is_stale(store):
    _run(store, "aa", "failed", "2024-06-10T06:00:00+00:00")
    entry = collect_status(store, ["aa"], now=NOW)["sources"]["aa"]
    assert entry["last_success"] is None and entry["stale"] is True


def test_crashed_and_interrupted_runs_are_counted(store):
    for status in ("crashed", "interrupted", "interrupted", "succeeded", "failed"):
        _run(store, "aa", status, "2024-06-10T06:00:00+00:00")
    entry = collect_status(store, ["aa"], now=NOW)["sources"]["aa"]
    assert (entry["crashed_runs"], entry["interrupted_runs"]) == (1, 2)


def test_status_text_shows_freshness(store, db_path, capsys, monkeypatch):
    monkeypatch.setattr("basecrawler.commands.status.discover", lambda: {})
    _recall(store, "aa", "A-1", "2024-05-01")
    _run(store, "aa", "succeeded", "2024-06-09T06:00:00+00:00")   # long ago whenever the test runs
    _run(store, "aa", "interrupted", "2024-06-10T06:00:00+00:00")
    assert main(["status", "--lang", "en", "--db", db_path]) == 0
    out = capsys.readouterr().out
    assert ("       newest recall 2024-05-01; last success 2024-06-09T06:00:00+00:00; STALE (no success in 2 days); "
            "runs crashed 0, interrupted 1") in out.splitlines()
    assert main(["status", "--json", "--db", db_path]) == 0
    assert json.loads(capsys.readouterr().out)["sources"]["aa"]["interrupted_runs"] == 1
