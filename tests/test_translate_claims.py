"""Claims of several translators (issue #21): a running translator takes back the rows of a
worker that died or let its lease run out, a living worker's lease keeps its rows, SIGTERM
stops a worker within a second, and translation-memory counters never deadlock."""
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from basecrawler import Recall, Store
from pgcluster import any_db, pg_cluster, pg_url  # noqa: F401  (fixtures)
from translate.backends import Backend
from translate.claims import Claims, _host
from translate.fakeserver import FakeLibreTranslate, pseudo_korean
from translate.memory import TranslationMemory
from translate.testing import count_writes, seed, statuses, writes_per_row
from translate.worker import translate_pending
from basecrawler.store.engines.dialect import dialect_of

REPO = Path(__file__).resolve().parents[1]


class Scripted(Backend):
    """Translates like the fake server; `on_call(n)` runs before the n-th call (1-based)."""
    name = "scripted"

    def __init__(self, on_call=None, delay_s=0.0):
        super().__init__()
        self.on_call, self.delay_s, self.sent = on_call, delay_s, []

    def translate(self, texts, source_lang, target_lang="ko"):
        self.count_call()
        if self.on_call:
            self.on_call(self.calls)
        time.sleep(self.delay_s)
        self.sent.extend(texts)
        return [pseudo_korean(t) for t in texts]


def _seed(store, count):
    store.upsert("vehicle_recall", [Recall(country="XX", recall_number=f"R{n:03d}", recall_date=f"2024-{n % 12 + 1:02d}-01",
                                 source_lang="en", summary_original=f"Summary number {n} of the fleet")
                          for n in range(count)], source="demo")


def _claim_as(store, claimer, numbers, claimed_at=None):
    d = dialect_of(store)
    marks = d.params(len(numbers))
    store.write(lambda db: db.conn.execute(
        d.write(f"INSERT INTO translation_claims (tbl, row_id, claimed_by, claimed_at) SELECT 'recalls', id, {d.p}, {d.p} "
        f"FROM recalls WHERE recall_number IN ({marks})"), [claimer, claimed_at or time.time(), *numbers]))


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_running_worker_takes_back_the_claims_of_a_worker_killed_during_its_run(any_db):  # noqa: F811
    store = Store(any_db)
    _seed(store, 30)
    others = ["R001", "R002", "R003", "R013", "R014"]
    dead = f"{_host()} {_dead_pid()} killed"

    def a_worker_claims_then_dies(call):
        if call == 1:   # while our worker is busy with its first batch
            _claim_as(store, dead, others)
    report = translate_pending(store, Scripted(a_worker_claims_then_dies), batch_rows=5)
    assert report.translated == 30 and report.pending == 0   # in this run, not after a timeout
    assert store.scalar(dialect_of(store).query("SELECT COUNT(*) FROM translation_claims")) == 0
    store.close()


def test_running_worker_takes_back_claims_whose_lease_ran_out_even_behind_its_cursor(store, monkeypatch):
    monkeypatch.setenv("BASECRAWLER_TRANSLATE_LEASE", "0.3")
    _seed(store, 30)
    # Another machine's worker (its pid cannot be checked from here) claimed rows in the middle
    # of the queue, then went silent: our worker passes them, then takes them when the lease ends.
    elsewhere = "other-host 4242 silent"

    def claim_in_the_middle(call):
        if call == 1:
            _claim_as(store, elsewhere, ["R010", "R021", "R009"])   # the next rows in line
    backend = Scripted(claim_in_the_middle, delay_s=0.1)
    report = translate_pending(store, backend, batch_rows=3)
    assert report.translated == 30 and report.pending == 0
    assert len(backend.sent) == len(set(backend.sent)) == 30


def test_a_living_worker_renews_its_lease_so_no_other_worker_takes_its_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("BASECRAWLER_TRANSLATE_LEASE", "0.4")
    path = str(tmp_path / "shared.db")
    setup = Store(path)
    _seed(setup, 12)
    sent: list[str] = []
    slow, quick = Scripted(delay_s=1.2), Scripted()   # slow's batch outlasts the lease three times
    slow.sent = quick.sent = sent
    slow_store, quick_store = Store(path), Store(path)
    slow_thread = threading.Thread(target=translate_pending, args=(slow_store, slow), kwargs={"batch_rows": 6})
    slow_thread.start()
    deadline = time.monotonic() + 10
    while not setup.scalar("SELECT COUNT(*) FROM translation_claims") and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.6)   # past one lease: only renewals keep the slow worker's rows
    quick_report = translate_pending(quick_store, quick, batch_rows=6)
    slow_thread.join(20)
    assert quick_report.translated == 6                  # the other half only
    assert len(sent) == len(set(sent)) == 12             # no text sent twice
    assert statuses(setup) == {"translated": 12}
    for s in (setup, slow_store, quick_store):
        s.close()


def test_claims_name_the_host_and_pid_of_their_worker(store):
    _seed(store, 3)
    claims = Claims(store, lease_s=60)
    from translate.targets import translation_targets
    vehicle = next(t for t in translation_targets(store) if t.table == "recalls")   # the seeded type
    rows = claims.claim(vehicle, None, 2)
    assert [r["id"] for r in rows] and len(rows) == 2
    host, pid, _ = store.scalar("SELECT DISTINCT claimed_by FROM translation_claims").split(" ")
    assert (host, int(pid)) == (_host(), os.getpid())
    claims.release()
    assert store.scalar("SELECT COUNT(*) FROM translation_claims") == 0


def test_sigterm_stops_the_translate_command_within_a_second_and_gives_its_claims_back(db_path):
    store = Store(db_path)
    seed(store, 10)
    count_writes(store)
    store.close()
    with FakeLibreTranslate(delay_s=30) as server:   # a request that would hang for half a minute
        env = {**os.environ, "BASECRAWLER_TRANSLATE_BACKEND": "libretranslate",
               "BASECRAWLER_LIBRETRANSLATE_URL": server.url, "PYTHONPATH": str(REPO)}
        command = [sys.executable, "-m", "translate", "--db", db_path, "--no-progress"]
        worker = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 30
            while not server.requests and time.monotonic() < deadline:
                time.sleep(0.02)
            assert server.requests, "the worker never sent its request"
            signalled = time.monotonic()
            worker.send_signal(signal.SIGTERM)
            _, err = worker.communicate(timeout=10)
            took = time.monotonic() - signalled
        finally:
            if worker.poll() is None:
                worker.kill()
        server.delay_s = 0
    assert took < 1.5, f"took {took:.1f}s to stop"
    assert worker.returncode == 130 and "stopped on request" in err
    store = Store(db_path)
    assert statuses(store) == {"pending": 10} and not writes_per_row(store)
    assert store.scalar("SELECT COUNT(*) FROM translation_claims") == 0
    store.close()


def test_memory_counters_of_two_translators_never_deadlock(any_db, caplog):  # noqa: F811
    """Two transactions adding use counts to the same memory rows, given in opposite orders and
    interleaved statement by statement, must both commit without a deadlock (PostgreSQL) or a
    lock retry."""
    setup = Store(any_db)
    texts = [f"remembered text {n}" for n in range(6)]
    setup.write(lambda db: TranslationMemory(setup).remember(db, "en", {t: pseudo_korean(t) for t in texts}, "fake"))
    stores = [Store(any_db), Store(any_db)]
    orders = [texts, texts[::-1]]

    class SlowConn:   # each statement waits a little, so the two transactions interleave
        def __init__(self, conn):
            self._conn = conn

        def execute(self, *args):
            time.sleep(0.03)
            return self._conn.execute(*args)

        def __getattr__(self, name):
            return getattr(self._conn, name)

    errors = []

    def add_uses(store, order):
        memory = TranslationMemory(store)
        try:
            store.write(lambda db: memory.write(type("Db", (), {"conn": SlowConn(db.conn)})(), {},
                                                {"en": {t: 1 for t in order}}, ""))
        except Exception as exc:   # pragma: no cover - the failure this test is about
            errors.append(exc)
    caplog.set_level(logging.WARNING)
    threads = [threading.Thread(target=add_uses, args=(s, o)) for s, o in zip(stores, orders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert not [r for r in caplog.records if "locked" in r.getMessage() or "deadlock" in r.getMessage()]
    assert {r["uses"] for r in setup.query(dialect_of(setup).query("SELECT uses FROM translation_memory"))} == {2}
    for s in stores + [setup]:
        s.close()


def test_a_bad_lease_setting_is_one_line_that_names_it(store, db_path, monkeypatch, capsys):
    from basecrawler.cli import main
    from translate.fakeserver import FakeLibreTranslate
    seed(store, 1)
    monkeypatch.setenv("BASECRAWLER_TRANSLATE_LEASE", "soon")
    with FakeLibreTranslate() as server:
        monkeypatch.setenv("BASECRAWLER_TRANSLATE_BACKEND", "libretranslate")
        monkeypatch.setenv("BASECRAWLER_LIBRETRANSLATE_URL", server.url)
        code = main(["--db", db_path, "translate", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "BASECRAWLER_TRANSLATE_LEASE" in err and "Traceback" not in err
    assert statuses(store) == {"pending": 1}
