"""Prompt stop (issue 14.3, 22.2): SIGTERM or Ctrl-C ends a manual `run` and the scheduler
within 5 s even in the middle of a job. The running source stops at once — the request in
flight is cut (its item is fetched again next run) — with what it stored kept and its run
recorded `interrupted`; later sources are not started.

Real child processes against a slow loopback server: each listing page takes 0.2 s, so the
job would need 40 s to finish."""
import datetime as dt
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from basecrawler import Store
from basecrawler.operations.scheduler import META_LAST_JOB
from basecrawler.testing import LoopbackServer, Reply
from conftest import subprocess_env

PAGES = 200
STOP_WITHIN_S = 5.0

LAUNCHER = textwrap.dedent('''
    """`python launcher.py URL <basecrawler arguments>`: the real CLI with two test sources."""
    import sys
    from basecrawler import BaseCrawler
    import basecrawler.pipeline.registry

    URL = sys.argv.pop(1)

    class Slow(BaseCrawler):
        source = "aslow"
        country = "SL"
        endpoints = {"site": URL}

        def fetch(self):
            for page in range(1, %(pages)d + 1):
                yield self.http.get_json(self.url("site", f"/page/{page}"))

        def parse(self, raw):
            return {"recall_number": f"S-{raw['page']}", "recall_date": "2024-05-01"}

    class Later(Slow):
        source = "blater"
        country = "LA"

    basecrawler.pipeline.registry.discover = lambda *a, **k: {"aslow": Slow, "blater": Later}
    from basecrawler.cli import main
    raise SystemExit(main(sys.argv[1:]))
''') % {"pages": PAGES}


def _page(request):
    page = int(request.path.rsplit("/", 1)[1])
    return Reply(body=f'{{"page": {page}}}', headers={"Content-Type": "application/json"}, delay_s=0.2)


@pytest.fixture
def server():
    with LoopbackServer(_page) as running:
        yield running


def _start(tmp_path, server, *args):
    launcher = tmp_path / "launcher.py"
    launcher.write_text(LAUNCHER)
    env = subprocess_env(BASECRAWLER_RATE="1000", BASECRAWLER_ARCHIVE="0")
    return subprocess.Popen([sys.executable, str(launcher), server.url, *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _stop_mid_job(process, server, sig) -> float:
    """Wait until a few pages were served, send `sig`; seconds until the process ended."""
    deadline = time.monotonic() + 60
    while len(server.requests) < 5:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.05)
    process.send_signal(sig)
    sent = time.monotonic()
    try:
        process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    took = time.monotonic() - sent
    print(f"stopped {took:.2f} s after {signal.Signals(sig).name}")  # shown with -s
    return took


def _runs(db_path):
    store = Store(str(db_path))
    try:
        return {row["source"]: row["status"] for row in store.query("SELECT source, status FROM crawl_runs")}, \
            store.lookup.count("vehicle_recall", "aslow")
    finally:
        store.close()


def test_ctrl_c_stops_a_manual_run_at_the_next_item(tmp_path, server):
    db = tmp_path / "run.db"
    process = _start(tmp_path, server, "--db", str(db), "run", "--all")
    took = _stop_mid_job(process, server, signal.SIGINT)
    assert took < STOP_WITHIN_S
    assert process.returncode == 130
    runs, stored = _runs(db)
    assert runs == {"aslow": "interrupted"}             # blater was never started
    assert 4 <= stored < PAGES                          # what was fetched before the stop is kept


def test_sigterm_stops_the_scheduler_in_the_middle_of_its_job(tmp_path, server):
    db = tmp_path / "schedule.db"
    # A daily time five minutes ago and a last job the day before: the scheduler catches up at
    # once, whatever the hour the test runs at.
    fire = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
    store = Store(str(db))
    store.set_meta(f"{META_LAST_JOB}.incremental", (fire - dt.timedelta(days=1)).isoformat())
    store.close()
    process = _start(tmp_path, server, "--db", str(db), "schedule", "--at", f"{fire:%H:%M}", "--tz", "UTC",
                     "--full-day", "none", "--no-translate")
    took = _stop_mid_job(process, server, signal.SIGTERM)
    assert took < STOP_WITHIN_S
    assert process.returncode == 0
    runs, stored = _runs(db)
    assert runs == {"aslow": "interrupted"}
    assert 4 <= stored < PAGES   # the fifth page was in flight when the stop cut it
