"""The per-source test template (issue 21.3). The suite runs it for EVERY discovered source —
drop a module into sources/ (or register one through the entry point) and it is tested here,
with no list of ids to edit anywhere.

A source that declares HTTP endpoints comes with a replay set: the exchanges of a run, saved
under each endpoint's declared public host in fixtures/replay/ (README, "Adding a source": record
it against the real site or against a local server). From that set, through the real command
line, in a subprocess:
- a full offline run succeeds and stores records;
- its run line adds up (the two equations of the README);
- nothing prints a traceback;
- a second full run writes nothing: no new or updated record, the stored rows unchanged.

A source that declares no endpoint (it reads a local file through a setting) is skipped here
with the reason shown; its own tests cover it.

EVERY_SOURCE_REPLAY_DIR replaces fixtures/replay (tests/test_adding_a_source.py runs this
template on a source it has just written and recorded, in a temporary folder).
"""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from basecrawler.recordtypes import record_types
from basecrawler.pipeline.registry import discover
from support import assert_adds_up

REPO = Path(__file__).resolve().parents[1]
REPLAY_DIR = Path(os.environ.get("EVERY_SOURCE_REPLAY_DIR") or REPO / "fixtures" / "replay")
SOURCES = discover()


def replay_hosts_missing(crawler_class, replay_dir: Path = REPLAY_DIR) -> list[str]:
    """Declared endpoint hosts of a source with no folder in the replay set."""
    hosts = sorted({urlsplit(base).hostname for base in crawler_class.endpoints.values()})
    return [host for host in hosts if not (replay_dir / host).is_dir()]


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    # The child keeps this process's PYTHONPATH (the network guard, and a temporary sources
    # folder when one is put first) but no BASECRAWLER_* setting; it runs in tmp_path.
    env = {k: v for k, v in os.environ.items() if not k.startswith("BASECRAWLER_")}
    env["BASECRAWLER_RATE"] = "1000"
    return subprocess.run([sys.executable, "-m", "basecrawler", "--db", str(tmp_path / "template.db"), *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def _rows(db: Path, sql: str, params=()) -> list[dict]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute(sql, params)]


def _stored(db: Path, source_id: str) -> list[dict]:
    """Every stored record of a source, of every type (a source may emit several types), but
    the bookkeeping `input_hash`: a re-run may point a row at the input it saw this time when
    that input changes nothing (eu sends an addendum's alert without its date the second
    time), which is what lets the next run recognise it unvalidated; the data stays."""
    tables = {row["name"] for row in _rows(db, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    return [{"type": name, **{k: v for k, v in row.items() if k != "input_hash"}}
            for name, declared in record_types().items() if declared.table in tables
            for row in _rows(db, f"SELECT * FROM {declared.table} WHERE source = ? ORDER BY id", (source_id,))]


@pytest.mark.parametrize("source_id", sorted(SOURCES))
def test_source_runs_offline_from_its_replay_set_and_a_rerun_writes_nothing(source_id, tmp_path):
    crawler_class = SOURCES[source_id]
    if not crawler_class.endpoints:
        pytest.skip(f"{source_id} declares no HTTP endpoint (a local file); its own tests cover it")
    missing = replay_hosts_missing(crawler_class)
    assert not missing, (f"{source_id} has no replay set for {', '.join(missing)} in {REPLAY_DIR}: record one "
                         f"(README, Adding a source: run --source {source_id} --record fixtures/replay)")
    command = ("run", "--source", source_id, "--mode", "full", "--replay", str(REPLAY_DIR))
    first = _cli(tmp_path, *command)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "Traceback" not in first.stdout + first.stderr, first.stderr[-3000:]
    db = tmp_path / "template.db"
    stored = _stored(db, source_id)
    assert stored, f"{source_id}: the replay run stored no record"
    [run] = _rows(db, "SELECT * FROM crawl_runs WHERE source = ?", (source_id,))
    assert run["status"] == "succeeded", run
    assert_adds_up(run)
    assert run["new"] == len(stored), run                  # one stored row per new record

    second = _cli(tmp_path, *command)
    assert second.returncode == 0 and "Traceback" not in second.stdout + second.stderr, second.stderr[-3000:]
    rerun = _rows(db, "SELECT * FROM crawl_runs WHERE source = ? ORDER BY id", (source_id,))[-1]
    assert_adds_up(rerun)
    assert (rerun["new"], rerun["updated"], rerun["store_failed"]) == (0, 0, 0), rerun
    assert _stored(db, source_id) == stored
