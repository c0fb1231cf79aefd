"""A stop is a stop (issue 22.2): SIGTERM during a read that a hostile server keeps alive (headers
then one byte a second, or headers dribbled byte by byte) ends the CLI `run` and the scheduler
within seconds — the stop hook shuts the client's sockets down, no item boundary is waited
for — and the run row is `interrupted`, never left `running`. Real child processes."""
from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from basecrawler import Store
from basecrawler.operations.scheduler import META_LAST_JOB
from conftest import subprocess_env
from hostile_support import RawServer, slow_headers, slowloris

STOP_WITHIN_S = 10.0

LAUNCHER = textwrap.dedent('''
    """`python launcher.py URL HOW <basecrawler arguments>`: the real CLI with one slow source."""
    import sys
    from basecrawler import BaseCrawler
    import basecrawler.pipeline.registry

    URL, HOW = sys.argv.pop(1), sys.argv.pop(1)

    class Slow(BaseCrawler):
        source = "slow"
        country = "SL"
        endpoints = {"site": URL}

        def fetch(self):
            if HOW == "download":
                with self.http.download_to_file(self.url("site", "/big.csv")) as download:
                    yield {"n": download.size}
            else:
                yield self.http.get_json(self.url("site", "/list.json"))

        def parse(self, raw):
            return {"recall_number": "S-1", "recall_date": "2024-05-01"}

    basecrawler.pipeline.registry.discover = lambda *a, **k: {"slow": Slow}
    from basecrawler.cli import main
    raise SystemExit(main(sys.argv[1:]))
''')


def _start(tmp_path, server, how, *args):
    launcher = tmp_path / "launcher.py"
    launcher.write_text(LAUNCHER)
    env = subprocess_env(BASECRAWLER_RATE="1000", BASECRAWLER_ARCHIVE="0")
    return subprocess.Popen([sys.executable, str(launcher), server.url, how, *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _stop_during_the_read(process, server, sig=signal.SIGTERM) -> tuple[float, str]:
    deadline = time.monotonic() + 60
    while not server.requests:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the request never came"
        time.sleep(0.05)
    time.sleep(1.5)   # well inside the slow read
    assert process.poll() is None
    process.send_signal(sig)
    sent = time.monotonic()
    try:
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    took = time.monotonic() - sent
    print(f"ended {took:.2f} s after {signal.Signals(sig).name}")
    return took, stderr


def _run_rows(db):
    store = Store(str(db))
    try:
        return [(row["source"], row["status"]) for row in store.query("SELECT source, status FROM crawl_runs")]
    finally:
        store.close()


@pytest.mark.parametrize("server_kind, how", [("slowloris", "json"), ("slowloris", "download"),
                                              ("slow_headers", "json")])
def test_sigterm_during_a_slow_read_ends_the_run_at_once(tmp_path, server_kind, how):
    handler = slowloris(seconds=120) if server_kind == "slowloris" else slow_headers(seconds=120)
    db = tmp_path / "run.db"
    with RawServer(handler) as server:
        process = _start(tmp_path, server, how, "--db", str(db), "run", "--source", "slow")
        took, stderr = _stop_during_the_read(process, server)
    assert took < STOP_WITHIN_S
    assert process.returncode == 130
    assert _run_rows(db) == [("slow", "interrupted")]
    assert "Traceback" not in stderr
    assert list((tmp_path / "tmp").glob("*.part")) == []   # the cut download's temp file is gone


def test_sigterm_during_a_slow_read_ends_the_scheduler(tmp_path):
    db = tmp_path / "schedule.db"
    fire = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
    store = Store(str(db))
    store.set_meta(f"{META_LAST_JOB}.incremental", (fire - dt.timedelta(days=1)).isoformat())
    store.close()
    with RawServer(slowloris(seconds=120)) as server:
        process = _start(tmp_path, server, "json", "--db", str(db), "schedule", "--at", f"{fire:%H:%M}", "--tz", "UTC",
                         "--full-day", "none", "--no-translate")
        took, stderr = _stop_during_the_read(process, server)
    assert took < STOP_WITHIN_S
    assert process.returncode == 0
    assert _run_rows(db) == [("slow", "interrupted")]
    assert "Traceback" not in stderr


# ---- in process: a stop during the detail lookups of a two-phase source ---------------------------
def test_a_stop_during_detail_lookups_releases_them_and_the_run_is_interrupted(store, db_path, monkeypatch):
    import threading

    from basecrawler import BaseCrawler
    from basecrawler.stopping import StopEvent
    from basecrawler.testing import fast_settings

    class TwoPhase(BaseCrawler):
        source = "twophase"
        country = "TP"
        endpoints = {"site": "http://placeholder.test"}

        def fetch(self):
            for n in range(3):
                yield {"n": n}

        def parse(self, raw):
            return {"recall_number": f"D-{raw['n']}", "recall_date": "2024-05-01"}

        def fetch_detail(self, recall):
            return self.http.get_json(self.url("site", f"/detail/{recall['recall_number']}"))

    stop = StopEvent()
    with RawServer(slowloris(seconds=60)) as server:
        monkeypatch.setenv("BASECRAWLER_TWOPHASE_SITE_URL", server.url)

        def stop_when_asked():
            deadline = time.monotonic() + 20
            while len(server.requests) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)
            stop.set()

        threading.Thread(target=stop_when_asked, daemon=True).start()
        started = time.monotonic()
        result = TwoPhase(store, settings=fast_settings(db_path), stop=stop).run()
        took = time.monotonic() - started
    assert result.status == "interrupted" and took < STOP_WITHIN_S
    assert store.dead_letters.open_dead_letters("twophase") == []          # a cut lookup is nobody's failure
    states = [r["state"] for r in store.query("SELECT state FROM enrichment WHERE key_prefix = 'TP'")]
    assert states == ["pending"] * 3                           # back in the queue, not left `processing`
    assert {r["recall_number"] for r in store.query("SELECT recall_number FROM recalls")} == {"D-0", "D-1", "D-2"}
