"""A full disk during `run` (issue 22.5): one line (`disk full at …`), exit 3, no traceback;
every batch committed before stays, the run row is closed, later sources are not started.
The disk fills for real inside SQLite: the runner's store gets a `PRAGMA max_page_count`
just above its current size, so SQLite answers SQLITE_FULL exactly as on a full disk."""
import errno
import sqlite3

import pytest

import basecrawler.pipeline.runner as runner
from basecrawler import BaseCrawler, Store
from basecrawler.cli import main
from basecrawler.commands import run as run_command
from basecrawler.store.diskfull import is_disk_full

ROWS = 3000


class Filling(BaseCrawler):
    source = "filling"
    country = "AA"
    endpoints = {"site": "https://a.example"}

    def fetch(self):
        for n in range(ROWS):
            yield {"id": f"F-{n}"}

    def parse(self, raw):
        return {"recall_number": raw["id"], "recall_date": "2024-01-02",
                "summary_original": f"{raw['id']} brake hose may rupture " * 8}


class Later(Filling):
    source = "later"

    def fetch(self):
        yield {"id": "L-1"}


@pytest.fixture
def small_disk(monkeypatch):
    # Commits of 500 records, so several land before the one that fills the disk (the default
    # commit of 5,000 would hold all 3,000 rows in one).
    monkeypatch.setenv("BASECRAWLER_BATCH_SIZE", "500")
    class SmallDisk(Store):
        def __init__(self, path):
            super().__init__(path)
            pages = self.db.conn.execute("PRAGMA page_count").fetchone()[0]
            self.db.conn.execute(f"PRAGMA max_page_count = {pages + 400}")   # ~1.6 MB more

    monkeypatch.setattr(runner, "Store", SmallDisk)
    monkeypatch.setattr(run_command, "discover", lambda: {"filling": Filling, "later": Later})


def test_a_full_disk_is_one_line_exit_3_and_keeps_what_was_stored(small_disk, db_path, capsys):
    assert main(["--db", db_path, "run", "--source", "filling", "--source", "later", "--mode", "full"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err
    ours = [line for line in err.splitlines() if line.startswith("basecrawler:")]
    assert len(ours) == 1 and ours[0].startswith("basecrawler: disk full at ")
    store = Store(db_path)
    try:
        kept = store.scalar("SELECT COUNT(*) FROM recalls")
        runs = store.query("SELECT source, status, saved FROM crawl_runs")
    finally:
        store.close()
    assert 0 < kept < ROWS                                   # the batches before the full one stay
    assert runs == [{"source": "filling", "status": "failed", "saved": kept}]   # closed; `later` never started


def test_disk_full_is_recognised_from_every_engine_and_the_file_system():
    assert is_disk_full(sqlite3.OperationalError("database or disk is full"))
    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    wrapped = RuntimeError("archive write failed")
    wrapped.__cause__ = OSError(errno.ENOSPC, "No space left on device")
    assert is_disk_full(wrapped)
    assert is_disk_full("OperationalError: database or disk is full")
    assert not is_disk_full(sqlite3.OperationalError("database is locked"))
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied"))
