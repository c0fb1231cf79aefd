"""A crawl or a translation pass killed with SIGKILL at five kinds of points (mid-fetch,
mid-batch, mid-enrichment, mid-download, mid-translation), then run again: the database is
intact, holds every record of the fixture universe exactly once with clean values, and no
enrichment item is left in `processing`."""
import subprocess
import sys
from pathlib import Path

import pytest

from basecrawler import Store
from basecrawler.pipeline.registry import discover
from basecrawler.testing import fast_settings

from .expected_universe import differences
from .universe import REPLAY_DIR, clean_reference, records, settle

CHILD = Path(__file__).with_name("crash_child.py")

CRAWL_KILLS = [
    ("us", "fetch:3"),      # list stored, killed while detail requests go out
    ("au", "fetch:5"),      # killed between listing and detail pages
    ("ca", "batch:2"),      # second batch written, transaction not committed
    ("eu", "batch:1"),
    ("us", "enrich:4"),     # an item claimed into `processing`, its result never applied
    ("jp", "download:1"),   # a PDF body half written
]


def kill_child(*args) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, str(CHILD), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == -9, f"the child was not killed ({done.returncode}): {done.stderr[-2000:]}"
    return done


def assert_intact(store: Store) -> None:
    assert store.scalar("PRAGMA integrity_check") == "ok"
    assert store.scalar("SELECT COUNT(*) FROM (SELECT 1 FROM recalls GROUP BY country, recall_number HAVING COUNT(*) > 1)") == 0


@pytest.mark.parametrize("source_id, point", CRAWL_KILLS, ids=[f"{s}-{p}" for s, p in CRAWL_KILLS])
def test_crawl_killed_then_rerun_stores_the_universe_exactly_once(tmp_path, source_id, point):
    reference = clean_reference(tmp_path, source_id)
    db = str(tmp_path / "crash.db")
    kill_child(db, "crawl", source_id, point)

    store = Store(db)
    assert_intact(store)
    before = records(store, source_id)
    if point.startswith("enrich"):
        assert store.scalar("SELECT COUNT(*) FROM enrichment WHERE state = 'processing'") > 0
    else:
        assert before != reference  # the kill really cut the run short

    crawler_class = discover()[source_id]
    # A re-run after a crash: `processing` left by the dead worker is reclaimed at once here
    # (the default waits 30 minutes), and the ladder gets enough runs to settle.
    settle(crawler_class, store, fast_settings(db, replay_dir=str(REPLAY_DIR), processing_timeout_s=0))
    assert_intact(store)
    assert records(store, source_id) == reference
    assert differences(source_id, records(store, source_id)) == []   # what the payloads say
    assert store.scalar("SELECT COUNT(*) FROM enrichment WHERE state = 'processing'") == 0
    if source_id == "jp":
        states = {r["state"] for r in store.query("SELECT state FROM artifacts")}
        assert states == {"complete"}
    store.close()


def test_translation_killed_mid_batch_then_rerun_translates_every_row(tmp_path):
    from translate.backends import backend_from_env
    from translate.fakeserver import FakeLibreTranslate
    from translate.worker import count_pending, translate_pending

    db = str(tmp_path / "tr.db")
    store = Store(db)
    for source_id in ("eu", "au"):
        discover()[source_id](store, settings=fast_settings(db, replay_dir=str(REPLAY_DIR)), mode="full").run()
    total = count_pending(store)     # eu's product alerts are translated too, not only recalls
    with FakeLibreTranslate() as server:
        kill_child(db, "translate", server.url, "translate:2")
        assert_intact(store)
        pending = count_pending(store)
        assert 0 < pending < total  # one batch landed, the one in flight was lost
        backend = backend_from_env({"BASECRAWLER_TRANSLATE_BACKEND": "libretranslate",
                                    "BASECRAWLER_LIBRETRANSLATE_URL": server.url})
        report = translate_pending(store, backend, batch_rows=5)
    assert_intact(store)
    assert count_pending(store) == 0
    assert report.translated + report.from_memory + report.blocked + report.failed == pending
    store.close()
