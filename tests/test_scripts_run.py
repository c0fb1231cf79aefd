"""`scripts/run` on a machine without network (issue 21.1): offline it ends with one line naming
a command that works typed in the same shell, and `scripts/run --replay [DIR]` fills the store
from the recorded exchanges. Offline is simulated: every endpoint of every discovered source is
pointed at a closed loopback port (the network guard refuses anything else)."""
import shlex
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from basecrawler.pipeline.registry import discover
from conftest import subprocess_env

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / "scripts" / "run"
HINT = "to fill the store from the recorded replay set instead, type: "


@pytest.fixture(autouse=True)
def _installed():
    stamp = Path(sys.prefix) / ".basecrawler-installed"
    if not stamp.exists():   # scripts/setup would call pip, which needs the network
        pytest.skip("run `bash scripts/setup` once first: scripts/run calls it, and it is offline only once installed")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _offline_env(db: Path) -> dict:
    closed = f"http://127.0.0.1:{_closed_port()}"
    overrides = {f"BASECRAWLER_{sid.upper()}_{name.upper()}_URL": closed
                 for sid, cls in discover().items() for name in cls.endpoints}
    return subprocess_env(BASECRAWLER_DB=str(db), BASECRAWLER_HTTP_RETRIES="0", **overrides)


def _counts(db: Path) -> dict:
    """Stored records per source, over the tables of every record type."""
    from basecrawler.recordtypes import record_types
    counts: dict = {}
    with sqlite3.connect(db) as conn:
        for record_type in record_types().values():
            for source, n in conn.execute(f"SELECT source, COUNT(*) FROM {record_type.table} GROUP BY source"):
                counts[source] = counts.get(source, 0) + n
    return counts


def _sources_with_replay() -> set:
    from test_every_source import replay_hosts_missing
    return {sid for sid, cls in discover().items() if cls.endpoints and not replay_hosts_missing(cls)}


def test_offline_run_ends_with_a_line_that_works_when_typed(tmp_path):
    db = tmp_path / "recalls.db"
    env = _offline_env(db)
    offline = subprocess.run(["bash", str(RUN)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert offline.returncode == 1, offline.stderr[-2000:]
    assert "Traceback" not in offline.stderr, offline.stderr[-3000:]
    # One line says what to type; under scripts/run the job's own closing line follows it.
    [hint] = [line for line in offline.stderr.splitlines()[-4:] if HINT in line]
    typed = hint.split(HINT, 1)[1]
    assert shlex.split(typed) == [str(RUN), "--replay"]      # the script as it was called
    again = subprocess.run(["bash", "-c", typed], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert set(_counts(db)) == _sources_with_replay() and all(_counts(db).values())


def test_replay_takes_a_folder_relative_to_where_you_are(tmp_path):
    (tmp_path / "work").mkdir()
    (tmp_path / "mine").symlink_to(REPO / "fixtures" / "replay")
    db = tmp_path / "recalls.db"
    done = subprocess.run(["bash", str(RUN), "--replay", "../mine"], cwd=tmp_path / "work", env=_offline_env(db),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert set(_counts(db)) == _sources_with_replay()


def test_replay_of_a_missing_folder_is_one_line_exit_2(tmp_path):
    done = subprocess.run(["bash", str(RUN), "--replay", "nowhere"], cwd=tmp_path,
                          env=_offline_env(tmp_path / "x.db"), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == f"scripts/run: --replay {tmp_path / 'nowhere'}: no such folder\n"
    assert not (tmp_path / "x.db").exists()
