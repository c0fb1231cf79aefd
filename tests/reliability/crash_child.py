"""Child process for the crash-safety suite: runs one crawl (offline, from the replay set) or
one translation pass, and SIGKILLs itself at a chosen point. The kill points are patched in
here, in the test harness, so production code carries no test hooks.

    python crash_child.py DB crawl SOURCE fetch:2|batch:2|enrich:3|download:1
    python crash_child.py DB translate LIBRETRANSLATE_URL translate:2
"""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from basecrawler import Store  # noqa: E402
from basecrawler.fetch.http import HttpClient  # noqa: E402
from basecrawler.pipeline.registry import discover  # noqa: E402
from basecrawler.store.records import Records  # noqa: E402
from basecrawler.testing import fast_settings  # noqa: E402


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def after_nth_call(owner, name: str, n: int, *, before: bool = False) -> None:
    """Replace owner.name so that its n-th call kills the process (before or after the call)."""
    original = getattr(owner, name)
    calls = {"n": 0}

    def wrapper(*args, **kwargs):
        calls["n"] += 1
        if before and calls["n"] == n:
            die()
        result = original(*args, **kwargs)
        if not before and calls["n"] == n:
            die()
        return result

    setattr(owner, name, wrapper)


def arm(point: str, crawler_class=None) -> None:
    where, count = point.split(":")
    n = int(count)
    if where == "fetch":  # a request about to go out, mid-listing
        after_nth_call(HttpClient, "_with_policy", n, before=True)
    elif where == "batch":  # rows written, transaction still open: dies before COMMIT
        after_nth_call(Records, "write_batch", n)
    elif where == "enrich":  # item claimed (processing), detail not yet applied
        after_nth_call(crawler_class, "fetch_detail", n, before=True)
    elif where == "download":  # a document body half written to its temp file
        original = httpx.Response.iter_bytes
        seen = {"n": 0}

        def iter_bytes(self, chunk_size=None):
            if not str(self.request.url).endswith(".pdf"):
                yield from original(self, chunk_size)
                return
            seen["n"] += 1
            for index, chunk in enumerate(original(self, chunk_size or 512)):
                if seen["n"] == n and index == 1:
                    die()
                yield chunk

        httpx.Response.iter_bytes = iter_bytes
    elif where == "translate":  # translations written, transaction still open
        original_write = Store.write
        writes = {"n": 0}

        def write(self, operation):
            def op(db):
                result = operation(db)
                writes["n"] += 1
                if writes["n"] == n:
                    die()
                return result
            return original_write(self, op)

        Store.write = write
    else:
        raise SystemExit(f"unknown kill point {point}")


def main() -> None:
    db, action = sys.argv[1], sys.argv[2]
    if action == "crawl":
        source, point = sys.argv[3], sys.argv[4]
        crawler_class = discover()[source]
        arm(point, crawler_class)
        settings = fast_settings(db, replay_dir=str(ROOT / "fixtures" / "replay"), batch_size=2)
        result = crawler_class(db, settings=settings, mode="full").run()
        print(result.status)
    elif action == "translate":
        url, point = sys.argv[3], sys.argv[4]
        os.environ["BASECRAWLER_TRANSLATE_BACKEND"] = "libretranslate"
        os.environ["BASECRAWLER_LIBRETRANSLATE_URL"] = url
        os.environ["BASECRAWLER_TRANSLATE_BATCH"] = "5"   # several batches from a small universe
        from translate.backends import backend_from_env
        from translate.worker import translate_pending
        arm(point)
        report = translate_pending(Store(db), backend_from_env())
        print(report.summary_line())


if __name__ == "__main__":
    main()
