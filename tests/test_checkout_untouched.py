"""Tests never write into the checkout (issue 21.8): every test, and every child process it
starts without its own cwd=, runs in a temporary folder, so a store whose files go "next to the
working directory" (PostgreSQL's archive/ and artifacts/, an in-memory store, a default
./basecrawler.db) writes under tmp; and the session fails when the checkout gained a file."""
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from basecrawler import Store
from basecrawler.config import db_directory

REPO = Path(__file__).resolve().parents[1]


def _inside_checkout(path) -> bool:
    return Path(path).resolve().is_relative_to(REPO)


def test_the_working_directory_of_a_test_and_of_its_children_is_outside_the_checkout(tmp_path):
    assert Path.cwd().resolve() == tmp_path.resolve()
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getcwd())"], capture_output=True, text=True)
    assert not _inside_checkout(child.stdout.strip())


def test_files_that_follow_the_working_directory_land_under_tmp(tmp_path, monkeypatch):
    monkeypatch.delenv("BASECRAWLER_DATA_DIR", raising=False)
    # PostgreSQL keeps archive/ and artifacts/ in BASECRAWLER_DATA_DIR, else the working directory.
    assert not _inside_checkout(db_directory("postgresql://u@h/db"))
    store = Store(":memory:")
    try:
        assert not _inside_checkout(store.directory)
    finally:
        store.close()
    assert not _inside_checkout(db_directory("basecrawler.db"))    # the default database's folder


def test_a_session_that_writes_into_the_checkout_fails(tmp_path):
    """The end-of-session guard (tests/conftest.py) in a pytest of its own: a test that leaves
    a file in the checkout fails the run, naming the file. The checkout here is a git repository
    of its own holding the project's tests/conftest.py: a probe written into the real checkout
    would fail any other session ending meanwhile (scripts/test runs files side by side, and
    test_adding_a_source starts a pytest over the checkout)."""
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO / "tests" / "netguard", checkout / "tests" / "netguard",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "tests" / "conftest.py", checkout / "tests" / "conftest.py")
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    probe = checkout / f"probe-{uuid.uuid4().hex[:8]}.db"
    (checkout / "tests" / "test_probe.py").write_text(
        f"from pathlib import Path\n\ndef test_writes():\n    Path({str(probe)!r}).write_text('x')\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(checkout),
                           str(checkout / "tests" / "test_probe.py")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert probe.exists()
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"tests wrote into the checkout (they must use tmp_path): {probe.name}" in done.stderr
