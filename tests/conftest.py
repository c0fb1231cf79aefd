import importlib.util
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from basecrawler import Store
from basecrawler.cli import build_parser
from basecrawler.testing import fast_settings

# Loopback servers are reached directly even on a machine whose environment names a proxy (a CI
# runner's HTTP(S)_PROXY for the package index): both spellings, since the lower-case one wins
# in urllib's (and so httpx's) reading of the environment, and every child inherits them.
for _name in ("NO_PROXY", "no_proxy"):
    _hosts = [h for h in os.environ.get(_name, "").split(",") if h.strip()]
    os.environ[_name] = ",".join(dict.fromkeys([*_hosts, "127.0.0.1", "localhost"]))
# Hypothesis keeps its example database and constants under ./.hypothesis unless told otherwise:
# outside the checkout, like every other file a test writes.
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",
                      os.path.join(os.environ.get("TMPDIR", "/tmp"), "basecrawler-hypothesis"))
os.environ["OMP_THREAD_LIMIT"] = "1"
# pytest-xdist workers start with COLUMNS=80 and LINES=24 in their environment, which a plain run
# has not: commands that size a table to the terminal (search) would print 80 columns on a worker
# and 160 (their fallback) in a plain run.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)

# The network guard (tests/netguard/sitecustomize.py): installed here for this process, and
# first on PYTHONPATH so child processes that inherit the environment load it too.
NETGUARD_DIR = Path(__file__).resolve().parent / "netguard"
_spec = importlib.util.spec_from_file_location("_netguard", NETGUARD_DIR / "sitecustomize.py")
netguard = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(netguard)
netguard.install()
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(NETGUARD_DIR), os.environ.get("PYTHONPATH")) if p)


# Sub-command modules bind `discover` when first imported (`from …registry import discover`): a test
# that patches basecrawler.pipeline.registry.discover and then calls main() would otherwise leave
# its fake sources in every sub-command first imported under the patch, for every later test in
# the process. Under pytest-xdist any test file can be the first on its worker, so every
# sub-command is imported here, before any test runs.
build_parser()


@pytest.fixture(autouse=True)
def _no_network(tmp_path_factory, monkeypatch):
    """Fail any test that (itself or through a child process) reached for a non-loopback host."""
    report = tmp_path_factory.mktemp("netguard") / "violations.txt"
    monkeypatch.setenv("NETGUARD_LOG", str(report))
    netguard.violations.clear()
    real_init = subprocess.Popen.__init__

    def guarded_init(self, *args, **kwargs):
        # A child given its own environment (e.g. PYTHONPATH=REPO) still loads the guard.
        if kwargs.get("env") is not None:
            env = dict(kwargs["env"])
            env.setdefault("NETGUARD_LOG", str(report))
            if str(NETGUARD_DIR) not in env.get("PYTHONPATH", "").split(os.pathsep):
                env["PYTHONPATH"] = os.pathsep.join(p for p in (str(NETGUARD_DIR), env.get("PYTHONPATH")) if p)
            kwargs["env"] = env
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded_init)
    yield
    seen = list(netguard.violations) + (report.read_text().splitlines() if report.exists() else [])
    netguard.violations.clear()
    if seen:
        pytest.fail("test reached for the network (only 127.0.0.1 is allowed): " + "; ".join(seen[:5]),
                    pytrace=False)


def subprocess_env(**extra) -> dict:
    """Environment for a child `python -m basecrawler`: this one minus BASECRAWLER_* settings,
    with the repository and the network guard on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BASECRAWLER_")}
    env["PYTHONPATH"] = os.pathsep.join([str(NETGUARD_DIR), str(NETGUARD_DIR.parents[1])])
    env.update(extra)
    return env


@pytest.fixture
def db_path(tmp_path):
    return str(tmp_path / "test.db")


@pytest.fixture
def store(db_path):
    s = Store(db_path)
    yield s
    s.close()


@pytest.fixture
def row_by_row(monkeypatch):
    """The batches the store wrote by its row-by-row (bisecting) path, each a list of keys;
    empty when every batch went at once (SQLite) or by the merge (PostgreSQL)."""
    from basecrawler.store.records import Records

    batches = []
    real = Records.write_bisecting

    def spy(self, db, plan, items, now, *sql):
        batches.append([plan.key(row) for row, _ in items])
        return real(self, db, plan, items, now, *sql)
    monkeypatch.setattr(Records, "write_bisecting", spy)
    return batches


@pytest.fixture
def settings(db_path):
    return fast_settings(db_path)


# ---- tests never write into the checkout -------------------------------------------------------
# Every test runs in a temporary working directory (and the session in one of its own), so
# anything written relative to it — a PostgreSQL store's archive/ and artifacts/ (they go to
# BASECRAWLER_DATA_DIR or the working directory), a default ./basecrawler.db, a child process
# started without cwd= — lands under tmp. At the end of the session the checkout is compared
# with its state at the start (`git status --porcelain --ignored`) and the run fails on any new
# file. Allowed: what pytest and Python keep for themselves (scripts/test points them outside
# anyway: -p no:cacheprovider, PYTHONPYCACHEPREFIX) and the web-view test's screenshots, which
# are its documented output (tests/screenshots/, ignored by git).
REPO = Path(__file__).resolve().parents[1]
CHECKOUT_ALLOWED = (".pytest_cache/", "__pycache__/", "tests/screenshots/")


def checkout_state() -> set[str] | None:
    """Paths git reports as untracked, ignored or changed in the checkout; None without git."""
    try:
        done = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all"], cwd=REPO,
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return {line[3:] for line in done.stdout.splitlines()
            if not any(part in line[3:] for part in CHECKOUT_ALLOWED) and not line[3:].startswith(".venv/")}


def _xdist_worker(config) -> bool:
    return hasattr(config, "workerinput")


# Under pytest-xdist (scripts/test runs the suite on several workers) the controller checks, once
# around the whole run: its session starts before any worker runs a test and finishes after the
# last one, and only its exit status is the run's (a worker's is dropped). A worker checking too
# would see the other workers' files come and go.
def pytest_sessionstart(session):
    if _xdist_worker(session.config):
        return
    session.config._checkout_before = checkout_state()


def pytest_sessionfinish(session, exitstatus):
    if _xdist_worker(session.config):
        return
    before = getattr(session.config, "_checkout_before", None)
    after = checkout_state()
    if before is None or after is None:
        return
    new = sorted(after - before)
    if new:
        session.config._checkout_written = new
        print("\ntests wrote into the checkout (they must use tmp_path): " + ", ".join(new[:20]), file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session", autouse=True)
def _session_cwd(tmp_path_factory):
    """Session-scoped fixtures that write relative to the working directory write under tmp."""
    previous = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("cwd"))
    yield
    os.chdir(previous)


@pytest.fixture(autouse=True)
def _test_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith("BASECRAWLER_"):
            monkeypatch.delenv(key, raising=False)
    logging.getLogger("basecrawler").setLevel(logging.INFO)


def _sqlite_c(name: str):
    """A C function of the SQLite library the sqlite3 module itself uses (None where the build
    does not export it: then nothing can have called it either)."""
    import ctypes
    import _sqlite3

    try:
        return getattr(ctypes.CDLL(_sqlite3.__file__), name)
    except (OSError, AttributeError):
        return None


def _lift_sqlite_heap_limit() -> None:
    """Take off SQLite's process-wide hard heap limit. The web view's connections set it
    (web/limits.py `harden`: right for the server's own process), and an in-process Datasette
    in a test sets it for the whole pytest worker, where every later test's SQLite memory (the
    connections earlier tests left open) counts against it: seen as MemoryError from
    `sqlite3.connect` in every test after one worker crossed it. The PRAGMA can only lower the
    limit, so the C call raises it."""
    import ctypes

    lift = _sqlite_c("sqlite3_hard_heap_limit64")
    if lift is not None:
        lift(ctypes.c_int64(0))


def _sqlite_memory_used() -> int:
    """The bytes SQLite holds in this process now (every connection's caches and statements)."""
    import ctypes

    used = _sqlite_c("sqlite3_memory_used")
    if used is None:
        return 0
    used.restype = ctypes.c_int64
    return used()


@pytest.fixture(autouse=True)
def _no_heap_limit_left_behind(monkeypatch):
    """No ceiling is left for the next test; and within a test, the ceiling an in-process
    Datasette sets counts from what the worker already holds, as the server's own process
    starts from nothing: a web test failed with MemoryError on a worker whose earlier tests
    had left connections (and Datasette's SQL threads, each with its own) holding their caches."""
    from basecrawler.reading.web import limits

    monkeypatch.setattr(limits, "HEAP_LIMIT_BYTES", limits.HEAP_LIMIT_BYTES + _sqlite_memory_used())
    yield
    _lift_sqlite_heap_limit()
