"""PostgreSQL in production (issue #21 point 10): nothing waits forever, a dropped connection
is re-established and its interrupted transaction redone (nothing lost, nothing twice), a crawl
survives a server restart, `run()` never escapes, and no password is ever printed.

The restart tests stop and start the server, so this module has a cluster of its own (the
session one stays untouched for the other modules)."""
from __future__ import annotations

import logging
import socket
import subprocess
import sys
import threading
import time

import psycopg
import pytest

from basecrawler import Store
from basecrawler.store.engines import redact, scrub
from basecrawler.store.engines.pg import ConnectionLost, InvalidDatabaseUrl, connection_params
from basecrawler.testing import fast_settings
from conftest import subprocess_env
from pgcluster import Cluster, _bin_dir
from support import ItemsCrawler
from basecrawler.store.engines.dialect import dialect_of


@pytest.fixture(scope="module")
def cluster():
    bin_dir = _bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL binaries not installed (apt-get install postgresql; scripts/test does)")
    own = Cluster(bin_dir).start()
    yield own
    own.stop()


@pytest.fixture
def url(cluster):
    return cluster.new_database()


class SilentServer:
    """A TCP server on 127.0.0.1 that accepts every connection and never answers."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)   # the accept loop checks `stopping`: a thread blocked in accept()
        self.port = self.sock.getsockname()[1]   # on a closed socket could take a reused descriptor
        self.accepted = []
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            self.accepted.append(conn)   # kept open, never read: the client waits for an answer

    def close(self):
        self.stopping.set()
        self._thread.join()
        self.sock.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def silent_server():
    server = SilentServer()
    yield server
    server.close()


def _offline_endpoints() -> dict:
    """Every source endpoint pointed at a closed loopback port (doctor probes them all)."""
    from basecrawler.pipeline.registry import discover

    return {f"BASECRAWLER_{sid.upper()}_{name.upper()}_URL": "http://127.0.0.1:9"
            for sid, cls in discover().items() for name in cls.endpoints}


def _cli(*args, env=None, timeout=60):
    started = time.monotonic()
    if "doctor" in args:
        env = {**_offline_endpoints(), **(env or {})}
    done = subprocess.run([sys.executable, "-m", "basecrawler", *args], capture_output=True, text=True,
                          timeout=timeout, env=subprocess_env(**(env or {})))
    return done, time.monotonic() - started


# ---- 1. no command waits forever ---------------------------------------------------------------
def test_status_against_a_server_that_never_answers_ends_within_the_connect_timeout(silent_server, tmp_path):
    db = f"postgresql://crawler:s3cret@127.0.0.1:{silent_server.port}/recalls"
    done, seconds = _cli("status", "--db", db, env={"BASECRAWLER_PG_CONNECT_TIMEOUT_S": "2"})
    assert seconds < 15, done.stderr
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "timeout" in lines[0] and "s3cret" not in lines[0], lines
    assert "postgresql://crawler:***@127.0.0.1" in lines[0]
    assert silent_server.accepted, "the client never reached the silent server"


def test_doctor_against_a_server_that_never_answers_prints_its_checklist_within_seconds(silent_server):
    db = f"postgresql://crawler:s3cret@127.0.0.1:{silent_server.port}/recalls"
    done, seconds = _cli("doctor", "--timeout", "5", "--db", db, env={"BASECRAWLER_PG_CONNECT_TIMEOUT_S": "2"})
    assert seconds < 30, done.stdout + done.stderr
    assert "s3cret" not in done.stdout + done.stderr
    database = [line for line in done.stdout.splitlines() if "database connection" in line]
    assert database and "✗" in database[0], done.stdout + done.stderr


def test_the_timeouts_have_defaults_the_environment_and_the_url_can_change(url, monkeypatch):
    def timeouts(db):
        store = Store(db)
        try:
            return store.scalar(dialect_of(store).query("SHOW statement_timeout")), connection_params(db)["connect_timeout"]
        finally:
            store.close()
    assert timeouts(url) == ("5min", 5)
    monkeypatch.setenv("BASECRAWLER_PG_CONNECT_TIMEOUT_S", "4")
    monkeypatch.setenv("BASECRAWLER_PG_STATEMENT_TIMEOUT_S", "7.5")
    assert timeouts(url) == ("7500ms", 4)
    assert timeouts(url + "?connect_timeout=3&options=-c%20statement_timeout%3D9s") == ("9s", "3")


def test_a_statement_over_the_statement_timeout_is_cancelled(url, monkeypatch):
    monkeypatch.setenv("BASECRAWLER_PG_STATEMENT_TIMEOUT_S", "0.5")
    store = Store(url)
    try:
        started = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled):
            store.scalar(dialect_of(store).query("SELECT pg_sleep(10)"))
        assert time.monotonic() - started < 5
    finally:
        store.close()


# ---- 2. a dropped connection -------------------------------------------------------------------
def _terminate(cluster, url: str, pid: int) -> None:
    with psycopg.connect(cluster.url("postgres"), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_a_transaction_cut_mid_way_is_run_again_whole_on_a_new_connection(cluster, url, caplog):
    store = Store(url)
    attempts = []

    def op(db):
        attempts.append(1)
        db.conn.execute(dialect_of(db.conn).write("INSERT INTO meta (key, value) VALUES ('a', '1')"))
        if len(attempts) == 1:   # the server ends this session half-way through the transaction
            _terminate(cluster, url, db.conn.execute(dialect_of(db.conn).query("SELECT pg_backend_pid()")).fetchone()[0])
        db.conn.execute(dialect_of(db.conn).write("INSERT INTO meta (key, value) VALUES ('b', '2')"))
        return "done"
    try:
        with caplog.at_level(logging.INFO):
            assert store.write(op) == "done"
        assert len(attempts) == 2
        assert store.query(dialect_of(store).query("SELECT key, value FROM meta ORDER BY key")) == [
            {"key": "a", "value": "1"}, {"key": "b", "value": "2"}]   # once each: the cut attempt left nothing
        assert not any(r.exc_info for r in caplog.records)
        assert any("connection to" in r.getMessage() and "lost" in r.getMessage() for r in caplog.records)
    finally:
        store.close()


def test_an_upsert_cut_inside_its_savepoint_is_redone_not_dead_lettered(cluster, url, monkeypatch):
    """A connection lost in the middle of the upsert's executemany reaches the bisecting
    `except`: it must not mistake the loss for rows the database refuses."""
    from basecrawler import Recall
    from basecrawler.recordtypes.upsert import UpsertPlan
    store = Store(url)
    real_params, calls = UpsertPlan.params, []
    # Asked before the upsert: inside it the connection is busy streaming the batch (COPY), and
    # a query of its own would wait for that stream to end.
    backend = store.scalar(dialect_of(store).query("SELECT pg_backend_pid()"))

    def cut_on_first_row(plan, row, now):
        calls.append(row["recall_number"])
        if len(calls) == 1:
            _terminate(cluster, url, backend)
        return real_params(plan, row, now)
    monkeypatch.setattr(UpsertPlan, "params", cut_on_first_row)
    try:
        result = store.upsert("vehicle_recall", [Recall(country="US", recall_number=f"N{n}", recall_date="2024-05-01")
                                       for n in range(4)], source="us")
        assert (result.new, result.failed) == (4, [])
        assert store.scalar(dialect_of(store).query("SELECT COUNT(*) FROM recalls")) == 4
    finally:
        store.close()


def test_a_read_outside_a_transaction_reconnects_by_itself(cluster, url):
    store = Store(url)
    try:
        _terminate(cluster, url, store.scalar(dialect_of(store).query("SELECT pg_backend_pid()")))
        assert store.scalar(dialect_of(store).query("SELECT 41 + 1")) == 42
    finally:
        store.close()


class SlowSource(ItemsCrawler):
    """Yields its items with a pause, so a server restart lands in the middle of the crawl."""

    source = "slow"
    pause_s = 0.01

    def fetch(self):
        for entry in self.items:
            time.sleep(self.pause_s)
            yield entry

    def parse(self, raw):
        return {"recall_number": raw, "recall_date": "2024-05-01", "summary_original": f"summary {raw}"}


class OtherSource(SlowSource):
    source = "other"
    country = "YY"


def test_a_crawl_survives_a_server_restart_losing_and_duplicating_nothing(cluster, url, caplog):
    store = Store(url)
    settings = fast_settings(url, batch_size=5)
    items = [f"R{n:04d}" for n in range(600)]
    restarted = threading.Event()

    class Restarting(SlowSource):
        def fetch(self):
            for index, entry in enumerate(super().fetch()):
                if index == 100:   # restart in the background while batches keep being written
                    threading.Thread(target=lambda: (cluster.restart(), restarted.set()), daemon=True).start()
                yield entry
    # Besides the restart (which may land between transactions), one batch is cut for sure
    # inside its transaction, after its rows were written and before its COMMIT.
    real_batch, batches = store.records.write_batch, []

    def cut_once(db, plan, rows, **kwargs):
        outcome = real_batch(db, plan, rows, **kwargs)
        batches.append(len(rows))
        if len(batches) == 60:
            _terminate(cluster, url, db.conn.execute(dialect_of(db.conn).query("SELECT pg_backend_pid()")).fetchone()[0])
        return outcome
    store.records.write_batch = cut_once
    try:
        with caplog.at_level(logging.INFO):
            result = Restarting(store, items=items, settings=settings, mode="full").run()
        assert restarted.is_set() and len(batches) >= 121   # 120 batches of 5, the cut one (at least) twice
        assert result.status == "succeeded", result.summary_line()
        assert (result.counts.fetched, result.counts.new, result.counts.dead_lettered) == (600, 600, 0)
        assert store.scalar(dialect_of(store).query("SELECT COUNT(*) FROM recalls")) == 600
        assert store.scalar(dialect_of(store).query("SELECT COUNT(DISTINCT recall_number) FROM recalls")) == 600
        assert store.scalar(dialect_of(store).query("SELECT COUNT(*) FROM dead_letters")) == 0
        assert store.runs.last_run("slow")["status"] == "succeeded"
        assert not any(r.exc_info for r in caplog.records), "a traceback was logged"
        assert any("reconnected" in r.getMessage() for r in caplog.records)
    finally:
        store.close()


def test_a_server_gone_for_good_fails_the_source_in_one_line_and_later_sources_still_run(
        cluster, url, caplog, monkeypatch):
    monkeypatch.setenv("BASECRAWLER_PG_RECONNECT_S", "1")
    store = Store(url)
    settings = fast_settings(url, batch_size=5)

    class Stopping(SlowSource):
        def fetch(self):
            for index, entry in enumerate(super().fetch()):
                if index == 20:
                    cluster._run(f"{cluster.bin_dir}/pg_ctl", "-D", cluster.data, "-m", "fast", "-w", "stop")
                yield entry
    try:
        with caplog.at_level(logging.INFO):
            failed = Stopping(store, items=[f"S{n}" for n in range(40)], settings=settings, mode="full").run()
        assert failed.status == "failed"
        assert "ConnectionLost" in failed.error and "unreachable" in failed.error
        while_down = OtherSource(store, items=["T1"], settings=settings, mode="full").run()   # never raises
        assert while_down.status == "failed" and "DatabaseUnreachable" in while_down.error
        assert not any(r.exc_info for r in caplog.records), "a traceback was logged"
        _start(cluster)
        later = OtherSource(store, items=["T1", "T2"], settings=settings, mode="full").run()
        assert later.status == "succeeded", later.summary_line()
        assert store.lookup.count("vehicle_recall", "other") == 2
        assert store.lookup.count("vehicle_recall", "slow") >= 20   # what was stored before the server went stays
    finally:
        store.close()
        _start(cluster)


def _lock_taken_by_someone(url: str, source: str) -> bool:
    """Whether a session holds `source`'s run lock (tried from a session of our own)."""
    from basecrawler.pipeline.runlock import LOCK_NAMESPACE, PgRunLock
    with psycopg.connect(url, autocommit=True) as probe:
        free = probe.execute("SELECT pg_try_advisory_lock(%s, %s)",
                             [LOCK_NAMESPACE, PgRunLock(url, scope=source).key]).fetchone()[0]
    return not free


def test_a_crawl_takes_its_run_lock_back_after_a_server_restart(cluster, url, caplog):
    store = Store(url)
    seen = {}

    class Restarting(SlowSource):
        pause_s = 0

        def fetch(self):
            for index, entry in enumerate(super().fetch()):
                if index == 30:
                    seen["before"] = _lock_taken_by_someone(url, "slow")
                    cluster.restart()   # ends every session: the lock's too
                if index == 60:         # six batches written since the restart
                    seen["after"] = _lock_taken_by_someone(url, "slow")
                yield entry
    try:
        with caplog.at_level(logging.INFO):
            result = Restarting(store, items=[f"L{n}" for n in range(80)], settings=fast_settings(url, batch_size=5),
                                mode="full").run()
        assert result.status == "succeeded", result.summary_line()
        assert seen == {"before": True, "after": True}
        assert any("taken back" in r.getMessage() for r in caplog.records)
        assert not _lock_taken_by_someone(url, "slow")   # and given back at the end
    finally:
        store.close()


def test_a_crawl_whose_run_lock_was_taken_during_a_restart_stops_in_one_line(cluster, url, caplog):
    from basecrawler.pipeline.runlock import LOCK_NAMESPACE, PgRunLock
    store = Store(url)
    rival = []

    class Restarting(SlowSource):
        pause_s = 0

        def fetch(self):
            for index, entry in enumerate(super().fetch()):
                if index == 30:
                    cluster.restart()
                    # Another machine starts the same source before this crawl writes again.
                    rival.append(psycopg.connect(url, autocommit=True))
                    rival[0].execute("SELECT pg_advisory_lock(%s, %s)", [LOCK_NAMESPACE, PgRunLock(url, scope="slow").key])
                yield entry
    try:
        with caplog.at_level(logging.INFO):
            result = Restarting(store, items=[f"L{n}" for n in range(80)], settings=fast_settings(url, batch_size=5),
                                mode="full").run()
        assert result.status == "failed" and "RunLockLost" in result.error, result.summary_line()
        assert "taken by another crawl" in result.error
        # Nothing written after the restart: the batch refused at its BEGIN is not flushed later.
        assert store.lookup.count("vehicle_recall", "slow") == 30, store.lookup.count("vehicle_recall", "slow")
        assert store.runs.last_run("slow")["status"] == "failed"   # the run's own record is still written
        assert not any(r.exc_info for r in caplog.records), "a traceback was logged"
    finally:
        for conn in rival:
            conn.close()
        store.close()


def _start(cluster) -> None:
    """Start the module's server again if a test stopped it."""
    try:
        with psycopg.connect(cluster.url("postgres"), connect_timeout=2):
            return
    except psycopg.OperationalError:
        pass
    cluster._run(f"{cluster.bin_dir}/pg_ctl", "-D", cluster.data, "-l", f"{cluster.root}/log", "-w", "start",
                 "-o", f"-k {cluster.root} -p {cluster.port} -c listen_addresses=127.0.0.1 -c fsync=off")


# ---- 3. passwords are never printed ------------------------------------------------------------
@pytest.mark.parametrize("db", [
    "postgresql://crawler:pa%ss@127.0.0.1:1/recalls",        # a raw % (invalid percent-encoding)
    "postgresql://crawler:pa%@127.0.0.1:1/recalls",
    "postgresql://crawler:pa%zzss@127.0.0.1:1/recalls",
])
def test_a_url_libpq_cannot_read_gives_one_line_without_the_password(db, tmp_path):
    secret = db.split(":")[2].rsplit("@", 1)[0]
    for args in (["status"], ["migrate", "--to", str(tmp_path / "copy.db")]):
        done, _ = _cli(*args, "--db", db)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert secret not in done.stderr + done.stdout and "pa" not in lines[0].split("crawler:")[1][:3], lines
        assert done.returncode in (1, 2)


def test_migrate_to_a_bad_url_names_the_database_not_a_source_file(tmp_path):
    source = tmp_path / "here.db"
    Store(str(source)).close()
    done, _ = _cli("migrate", "--db", str(source), "--to", "postgresql://crawler:pa%ss@127.0.0.1:1/recalls")
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1 and done.returncode == 2, done.stderr
    assert "postgresql://crawler:***@127.0.0.1:1/recalls" in line and ".py" not in line and "pa%ss" not in line


def test_doctor_with_a_bad_url_prints_its_checklist_with_the_database_line_failed():
    done, _ = _cli("doctor", "--timeout", "1", "--db", "postgresql://crawler:pa%ss@127.0.0.1:1/recalls")
    assert "pa%ss" not in done.stdout + done.stderr
    database = [line for line in done.stdout.splitlines() if "database connection" in line]
    assert database and "✗" in database[0], done.stdout + done.stderr
    assert "Traceback" not in done.stderr


def test_redact_and_scrub_never_leave_the_password():
    assert redact("postgresql://u:p#ss/x@h/db") == "postgresql://u:***@h/db"
    assert redact("postgresql://u:p@ss@h:5/db") == "postgresql://u:***@h:5/db"
    assert redact("postgresql://h/db?sslmode=require&password=abc") == "postgresql://h/db?sslmode=require&password=***"
    assert scrub('invalid percent-encoded token: "se%cret"', "postgresql://u:se%cret@h/db") == \
        'invalid percent-encoded token: "***"'
    with pytest.raises(InvalidDatabaseUrl) as caught:
        connection_params("postgresql://u:se%cret@h/db")
    assert "se%cret" not in str(caught.value) and "postgresql://u:***@h/db" in str(caught.value)
    assert ConnectionLost("x").kind == "connection_lost"


# ---- 4. a restart mid-translate ----------------------------------------------------------------
def test_a_translation_run_survives_a_server_restart_losing_and_duplicating_nothing(cluster, url, caplog):
    from basecrawler import Recall
    from translate.backends import Backend
    from translate.fakeserver import pseudo_korean
    from translate.worker import translate_pending

    class RestartingBackend(Backend):
        """Translates like the fake server; the server restarts during the third call."""
        name = "restarting"

        def __init__(self):
            super().__init__()
            self.sent = []

        def translate(self, texts, source_lang, target_lang="ko"):
            self.count_call()
            if self.calls == 3:   # rows claimed, their translations not written yet
                cluster.restart()
            self.sent.extend(texts)
            return [pseudo_korean(t) for t in texts]

    store = Store(url)
    try:
        store.upsert("vehicle_recall", [Recall(country="XX", recall_number=f"T{n:03d}", recall_date="2024-05-01",
                                     source_lang="en", summary_original=f"Summary number {n} of the fleet")
                              for n in range(40)], source="demo")
        backend = RestartingBackend()
        with caplog.at_level(logging.INFO):
            report = translate_pending(store, backend, batch_rows=5)
        assert backend.calls > 3, "the restart never happened"
        assert (report.translated, report.pending) == (40, 0)
        assert len(backend.sent) - len(set(backend.sent)) <= 5    # at most the cut batch sent again
        assert len(set(backend.sent)) == 40
        assert store.scalar(dialect_of(store).query("SELECT COUNT(*) FROM recalls WHERE summary_ko IS NULL OR translated_at IS NULL")) == 0
        assert store.scalar(dialect_of(store).query("SELECT COUNT(*) FROM translation_claims")) == 0
        assert not any(r.exc_info for r in caplog.records), "a traceback was logged"
        assert any("reconnected" in r.getMessage() for r in caplog.records)
    finally:
        store.close()


# ---- 5. a server that hangs after accepting ----------------------------------------------------
def _server_processes(cluster) -> list[int]:
    """The postmaster and every process it started (its backends and helpers)."""
    import os
    with open(f"{cluster.data}/postmaster.pid") as f:
        postmaster = int(f.readline())
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == postmaster:
                        children.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return [postmaster, *children]


class frozen:
    """`with frozen(cluster):` — every process of the server SIGSTOPped (a frozen host: the
    kernel still accepts connections and answers keepalives), SIGCONT at the end."""

    def __init__(self, cluster):
        self.pids = _server_processes(cluster)

    def __enter__(self):
        import os
        import signal
        for pid in self.pids:
            os.kill(pid, signal.SIGSTOP)
        return self

    def __exit__(self, *exc):
        import os
        import signal
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def _within(seconds: float, call, unfreeze=None):
    """`call()`'s result or exception, run in a thread; a call still waiting after `seconds`
    fails the test (the server is thawed first, so nothing is left hanging)."""
    outcome = []

    def run():
        try:
            outcome.append(call())
        except Exception as exc:
            outcome.append(exc)
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        for frozen_server in unfreeze or ():
            frozen_server.__exit__()
        pytest.fail(f"still waiting after {seconds}s: nothing cut the hung statement")
    return outcome[0]


@pytest.fixture
def short_timeouts(monkeypatch):
    monkeypatch.setenv("BASECRAWLER_PG_STATEMENT_TIMEOUT_S", "1")
    monkeypatch.setenv("BASECRAWLER_PG_CONNECT_TIMEOUT_S", "2")
    return {"BASECRAWLER_PG_STATEMENT_TIMEOUT_S": "1", "BASECRAWLER_PG_CONNECT_TIMEOUT_S": "2"}


def test_a_statement_to_a_server_frozen_after_accepting_ends_within_the_timeouts(cluster, url, short_timeouts):
    store = Store(url)
    try:
        assert store.scalar(dialect_of(store).query("SELECT 1")) == 1
        with frozen(cluster):
            started = time.monotonic()
            outcome = _within(10, lambda: store.scalar(dialect_of(store).query("SELECT 2")))
            waited = time.monotonic() - started
        assert waited < 1 + 2 + 1.5, waited          # statement + connect timeouts, and the watchdog's tick
        assert isinstance(outcome, ConnectionLost), outcome
        assert "did not answer within 3s" in str(outcome) and "\n" not in str(outcome)
        assert store.scalar(dialect_of(store).query("SELECT 3")) == 3         # once it answers again, the next statement reconnects
    finally:
        store.close()


def test_a_crawl_against_a_server_frozen_mid_way_fails_in_one_line_within_seconds(cluster, url, short_timeouts, caplog):
    store = Store(url)
    freezer = []

    class Freezing(SlowSource):
        def fetch(self):
            for index, entry in enumerate(super().fetch()):
                if index == 20:
                    freezer.append(frozen(cluster).__enter__())
                yield entry
    try:
        started = time.monotonic()
        with caplog.at_level(logging.INFO):
            result = _within(20, Freezing(store, items=[f"F{n}" for n in range(40)],
                                          settings=fast_settings(url, batch_size=5), mode="full").run,
                             unfreeze=freezer)
        waited = time.monotonic() - started
        assert result.status == "failed" and "did not answer" in result.error, result.summary_line()
        assert waited < 15, waited   # the cut statement (3 s), then one connect attempt (2 s) to record the run
        assert not any(r.exc_info for r in caplog.records), "a traceback was logged"
    finally:
        for frozen_server in freezer:
            frozen_server.__exit__()
        store.close()


class StallingServer(SilentServer):
    """Completes PostgreSQL's start-up (SSL refused, trust authentication, ready for query),
    then never answers a query."""

    def _accept(self):
        import struct
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            self.accepted.append(conn)
            threading.Thread(target=self._startup, args=(conn, struct), daemon=True).start()

    @staticmethod
    def _startup(conn, struct):
        try:
            while True:
                length = struct.unpack("!i", conn.recv(4, socket.MSG_WAITALL))[0]
                body = conn.recv(length - 4, socket.MSG_WAITALL)
                code = struct.unpack("!i", body[:4])[0]
                if code in (80877103, 80877104):   # SSLRequest / GSSENCRequest: not here
                    conn.sendall(b"N")
                    continue
                break
            def message(kind, payload):
                return kind + struct.pack("!i", len(payload) + 4) + payload
            conn.sendall(message(b"R", struct.pack("!i", 0))                       # AuthenticationOk
                         + message(b"S", b"server_version\x0015.0\x00")
                         + message(b"S", b"client_encoding\x00UTF8\x00")
                         + message(b"K", struct.pack("!ii", 1, 2))
                         + message(b"Z", b"I"))                                   # ReadyForQuery
        except (OSError, struct.error):
            pass   # then silence: the first query waits for an answer that never comes


def test_a_command_against_a_server_that_stalls_after_its_startup_ends_in_one_line(short_timeouts):
    server = StallingServer()
    try:
        db = f"postgresql://crawler:s3cret@127.0.0.1:{server.port}/recalls?sslmode=disable"
        try:
            done, seconds = _cli("status", "--db", db, env=short_timeouts, timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("status still waiting after 60s: nothing cut the stalled start-up")
        # The same command against a closed port costs the process's start-up alone (slow on a
        # loaded machine); the stall may add its 2 s cuts, not a wait of its own.
        refused, startup = _cli("status", "--db", "postgresql://crawler@127.0.0.1:9/recalls?sslmode=disable",
                                env=short_timeouts, timeout=60)
        assert refused.returncode != 0
        assert seconds < startup + 10, (seconds, startup, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 1 and len(lines) == 1, done.stderr
        assert "no answer within 2s after the connection was accepted" in lines[0] and "s3cret" not in lines[0]
    finally:
        server.close()
