import logging
import os

import pytest

from basecrawler import Store
from basecrawler.testing import fast_settings

# Tests never reach the internet: make any accidental real request fail fast.
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
os.environ["OMP_THREAD_LIMIT"] = "1"


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
