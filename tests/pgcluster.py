"""A throw-away PostgreSQL cluster for the tests (issue #17): started once per session in a
temp folder, on a free loopback port, from the Debian package's binaries, and stopped at the end.
Under pytest-xdist each worker is a session and starts a cluster of its own (folder and port
apart), so a test that restarts the server disturbs no test on another worker.

initdb refuses to run as root, so as root the cluster runs as the `postgres` system user the
package creates. Each test gets its own database, cloned from a template that is already
migrated (CREATE DATABASE … TEMPLATE takes ~0.1 s). Tests import the fixtures they use:

    from pgcluster import pg_cluster, pg_url  # noqa: F401  (pytest fixtures)

Without PostgreSQL binaries the PostgreSQL cases skip with the reason; scripts/test installs
them (BASECRAWLER_DEBIAN_EXTRAS), so in CI they run.
"""
from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile

import pytest

TEMPLATE = "basecrawler_template"
_counter = itertools.count()


def _bin_dir() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, bin_dir: str):
        self.bin_dir = bin_dir
        self.root = tempfile.mkdtemp(prefix="basecrawler-pg-")
        self.data = os.path.join(self.root, "data")
        self.port = 0
        self.user = None
        if os.geteuid() == 0:
            self.user = "postgres"
            entry = pwd.getpwnam(self.user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)

    @property
    def url_base(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}"

    def _run(self, *args: str) -> None:
        command = list(args)
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)

    def start(self) -> "Cluster":
        self._run(f"{self.bin_dir}/initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--locale=C.UTF-8", "--no-sync")
        # A free port can be taken between asking for it and the server binding it (the suite's
        # workers and other programs ask at the same time): then another port is tried.
        for attempt in range(3):
            self.port = _free_port()
            # Durability is not under test: fsync off keeps the suite fast.
            options = (f"-k {self.root} -p {self.port} -c listen_addresses=127.0.0.1 -c fsync=off "
                       "-c synchronous_commit=off -c full_page_writes=off -c max_connections=100")
            try:
                self._run(f"{self.bin_dir}/pg_ctl", "-D", self.data, "-l", os.path.join(self.root, "log"),
                          "-o", options, "-w", "-t", "60", "start")
                break
            except subprocess.CalledProcessError:
                if attempt == 2:
                    raise
        self.admin(f"CREATE DATABASE {TEMPLATE}")
        from basecrawler import Store
        Store(self.url(TEMPLATE)).close()   # migrated once; every test database is a copy
        return self

    def restart(self) -> None:
        """Stop the server (ending every session, as an administrator's restart does) and start
        it again on the same port."""
        self._run(f"{self.bin_dir}/pg_ctl", "-D", self.data, "-m", "fast", "-w", "-t", "60", "restart")

    def url(self, database: str) -> str:
        return f"{self.url_base}/{database}"

    def admin(self, sql: str) -> None:
        import psycopg
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(sql)

    def new_database(self) -> str:
        name = f"t{os.getpid()}_{next(_counter)}"
        self.admin(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
        return self.url(name)

    def drop_database(self, url: str) -> None:
        """Drop a test's database, closing what it left connected. A failure is let pass: the
        server may be down after a test that stopped it, and the folder goes at the end anyway."""
        import psycopg
        try:
            self.admin(f"DROP DATABASE IF EXISTS {url.rsplit('/', 1)[1]} WITH (FORCE)")
        except psycopg.Error:
            pass

    def stop(self) -> None:
        try:
            self._run(f"{self.bin_dir}/pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_cluster():
    bin_dir = _bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL binaries not installed (apt-get install postgresql; scripts/test does)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg not installed (pip install -e '.[pg]'; scripts/setup does)")
    cluster = Cluster(bin_dir).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def pg_url(pg_cluster):
    """A fresh, migrated PostgreSQL database for this test, dropped after it: each copy is ~10 MB
    in ~400 files, and deleting a few hundred of them at the end of the session, long written to
    disk by then, took one to two minutes."""
    url = pg_cluster.new_database()
    yield url
    pg_cluster.drop_database(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def any_db(request, tmp_path):
    """The store location for each engine: a SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "test.db")
    return request.getfixturevalue("pg_url")


@pytest.fixture
def pg_store(pg_url):
    """A Store on this test's fresh PostgreSQL database, closed after it."""
    from basecrawler import Store

    store = Store(pg_url)
    yield store
    store.close()


def spy_statements(store, monkeypatch, keep=lambda sql: sql[:40]) -> list:
    """What the store's PostgreSQL connection sends from now on (`keep` of each statement)."""
    sent = []
    conn = store.db.conn
    real = conn.run_statement

    def spy(sql, run, read_only=None):
        sent.append(keep(sql))
        return real(sql, run, read_only)
    monkeypatch.setattr(conn, "run_statement", spy)
    return sent
