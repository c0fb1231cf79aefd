"""Issue #13 point 9: a crawl killed with SIGKILL mid-download leaves a `running` row and a
partial download; the next `basecrawler run` marks the row `crashed` and removes the file."""
from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

from basecrawler.testing import LoopbackServer, Reply
from sources.ca import COLUMNS

from quirks_support import cli, rows

CHILD = Path(__file__).with_name("kill_mid_download.py")


def big_csv(recalls: int = 400, models: int = 5) -> bytes:
    """~1 MB: several 64 KiB chunks, so the child dies with part of the body on disk."""
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(COLUMNS)
    for n in range(recalls):
        for m in range(models):
            row = {"RECALL_NUMBER_NUM": str(2024000 + n), "YEAR": str(2015 + m), "MAKE_NAME_NM": "FORD",
                   "MODEL_NAME_NM": f"MODEL {m}", "UNIT_AFFECTED_NBR": "1,000.00", "SYSTEM_TYPE_ETXT": "Brakes",
                   "COMMENT_ETXT": "Issue: the brake hose may leak. " * 10, "RECALL_DATE_DTE": "2024-05-14"}
            writer.writerow([row.get(c, "") for c in COLUMNS])
    return out.getvalue().encode("utf-8")


def test_killed_run_is_marked_crashed_and_its_partial_download_removed(tmp_path):
    body = big_csv()
    assert len(body) > 4 * 65536
    db = tmp_path / "crash.db"
    with LoopbackServer(lambda request: Reply(200, body, {"Content-Type": "text/csv"})) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BASECRAWLER_")}
        env["BASECRAWLER_CA_DATA_URL"] = server.url
        child = subprocess.run([sys.executable, str(CHILD), str(db)], env=env, capture_output=True, text=True,
                               timeout=120)
        assert child.returncode == -9, child.stderr[-2000:]

        left = rows(db, "SELECT id, pid, status FROM crawl_runs")
        assert [r["status"] for r in left] == ["running"]
        partials = list((tmp_path / "tmp").glob("*.part"))
        assert len(partials) == 1 and partials[0].name.startswith(f"dl-{left[0]['pid']}-")
        assert partials[0].stat().st_size >= 65536

        done = cli(db, "run", "--source", "ca", "--mode", "full", env={"BASECRAWLER_CA_DATA_URL": server.url})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "marked crashed" in done.stderr and "removed 1 partial download" in done.stderr
    runs = rows(db, "SELECT id, status, finished_at, error FROM crawl_runs ORDER BY id")
    assert [r["status"] for r in runs] == ["crashed", "succeeded"]
    assert runs[0]["finished_at"] and "killed or crashed" in runs[0]["error"]
    assert not partials[0].exists() and list((tmp_path / "tmp").glob("*.part")) == []
    assert rows(db, "SELECT COUNT(*) AS n FROM recalls")[0]["n"] == 400


def test_a_live_process_keeps_its_running_row_and_partial_file(tmp_path):
    """Only the dead are closed: a row and a .part of a live pid (this test process) stay."""
    from basecrawler import Store
    from basecrawler.fetch.http import sweep_partial_downloads

    store = Store(str(tmp_path / "live.db"))
    live = store.runs.start_run("ca", "full", "waiting", os.getpid())
    dead = store.runs.start_run("ca", "full", "running", 2 ** 22 + 12345)   # above the default pid_max
    assert store.runs.close_dead_runs() == [dead]
    assert store.query("SELECT status FROM crawl_runs WHERE id = ?", [live])[0]["status"] == "waiting"
    (tmp_path / "tmp").mkdir()
    mine = tmp_path / "tmp" / f"dl-{os.getpid()}-abc.part"
    gone = tmp_path / "tmp" / f"dl-{2 ** 22 + 12345}-abc.part"
    mine.write_bytes(b"x")
    gone.write_bytes(b"y")
    assert [p for p, _ in sweep_partial_downloads(tmp_path / "tmp")] == [gone]
    assert mine.exists()
    store.close()


def test_ctrl_c_during_a_run_records_it_as_interrupted(tmp_path):
    """KeyboardInterrupt still reaches the caller, but the row says what happened instead of
    staying at `running` until the next run calls it crashed."""
    import pytest

    from basecrawler import BaseCrawler, Store
    from basecrawler.testing import fast_settings

    class Interrupted(BaseCrawler):
        source = "ctrlc"
        country = "XX"
        endpoints = {"site": "https://demo.example"}

        def fetch(self):
            yield {"id": "A"}
            raise KeyboardInterrupt

        def parse(self, raw):
            return {"recall_number": raw["id"], "recall_date": "2024-01-01"}

    db = str(tmp_path / "int.db")
    store = Store(db)
    with pytest.raises(KeyboardInterrupt):
        Interrupted(store, settings=fast_settings(db), mode="full").run()
    assert [r["status"] for r in store.query("SELECT status FROM crawl_runs")] == ["interrupted"]
    store.close()
