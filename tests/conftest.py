import importlib.util
import logging
import os
import subprocess
from pathlib import Path

import pytest

from basecrawler import Store
from basecrawler.testing import fast_settings

# Tests never reach the internet: make any accidental real request fail fast.
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
os.environ["OMP_THREAD_LIMIT"] = "1"

# The network guard (tests/netguard/sitecustomize.py): installed here for this process, and
# first on PYTHONPATH so child processes that inherit the environment load it too.
NETGUARD_DIR = Path(__file__).resolve().parent / "netguard"
_spec = importlib.util.spec_from_file_location("_netguard", NETGUARD_DIR / "sitecustomize.py")
netguard = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(netguard)
netguard.install()
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(NETGUARD_DIR), os.environ.get("PYTHONPATH")) if p)


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
def settings(db_path):
    return fast_settings(db_path)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith("BASECRAWLER_"):
            monkeypatch.delenv(key, raising=False)
    logging.getLogger("basecrawler").setLevel(logging.INFO)
