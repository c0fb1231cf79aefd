"""The enrichment ladder (basecrawler/pipeline/enrichment.py) with a two-phase demo source defined here:
a detail 404 is "not yet" and climbs the ladder, a transient failure keeps its level, a
dead worker's claim is reclaimed, results are applied with COALESCE."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest

from basecrawler.pipeline import enrichment
from basecrawler.commands.status import collect_status
from basecrawler.testing import LoopbackServer, Reply

from support import FakeClock, ItemsCrawler
from basecrawler.store.engines.dialect import dialect_of

REAL_BACKOFFS = (900.0, 3600.0, 21600.0, 86400.0)
REPO = Path(__file__).resolve().parents[1]


class LadderDemo(ItemsCrawler):
    source = "ladder"
    endpoints = {"detail": "https://detail.example"}

    def parse(self, raw):
        return {"recall_number": raw["id"], "recall_date": raw["date"], "summary_original": raw.get("summary"),
                "model_original": raw.get("model")}

    def fetch_detail(self, recall):
        data = self.http.get_json(self.url("detail", f"/detail/{recall['recall_number']}"))
        if data.get("nothing"):
            return None
        return {"model_original": data.get("model"), "summary_original": data.get("summary"),
                "extra": {"vehicles": data.get("vehicles", [])}}


class DetailServer:
    """MockTransport handler: per recall number a script of statuses, the last one repeating.
    Keeps (recall number, clock time) of every detail request."""

    def __init__(self, scripts: dict[str, list[int]], clock=None):
        self.scripts = {k: list(v) for k, v in scripts.items()}
        self.requests: list[tuple[str, float]] = []
        self.clock = clock or time.time

    def __call__(self, request: httpx.Request) -> httpx.Response:
        number = request.url.path.rsplit("/", 1)[-1]
        self.requests.append((number, self.clock()))
        script = self.scripts.get(number, [404])
        status = script.pop(0) if len(script) > 1 else script[0]
        if status == 200:
            return httpx.Response(200, json={"model": f"MODEL {number}", "vehicles": [{"model": f"MODEL {number}"}]})
        if status == 204:
            return httpx.Response(200, json={"nothing": True})
        if status == "html":                       # a 200 maintenance page where JSON belongs
            return httpx.Response(200, text="<!DOCTYPE html><html><body>Down for maintenance</body></html>")
        return httpx.Response(status, text="<html>error</html>")

    def count(self, number: str) -> int:
        return sum(1 for n, _ in self.requests if n == number)


def item(n, date="2024-05-01", **kw):
    return {"id": f"R{n}", "date": date, "summary": f"Summary {n}", **kw}


def crawl(store, settings, server, items, clock=None, **kw):
    crawler = LadderDemo(store, items=items, settings=settings, transport=httpx.MockTransport(server),
                         clock=clock, sleep=clock.sleep if clock else None, **kw)
    return crawler.run()


def queue_row(store, number):
    d = dialect_of(store)
    return store.query(d.query(f"SELECT * FROM enrichment WHERE record_key = {d.p}"), [number])[0]


def test_detail_404_twice_then_found_is_done_after_three_requests_none_before_backoff(store, settings):
    clock = FakeClock()
    server = DetailServer({"R1": [404, 404, 200]}, clock)
    settings = settings.with_(ladder_backoffs_s=REAL_BACKOFFS)
    crawl(store, settings, server, [item(1)], clock)            # attempt 1: 404 → level 1, due in 15 min
    first = server.requests[-1][1]
    clock.advance(899)
    crawl(store, settings, server, [item(1)], clock)            # not due yet: no request
    assert server.count("R1") == 1
    clock.advance(1)
    crawl(store, settings, server, [item(1)], clock)            # attempt 2: 404 → level 2, due in 1 h
    second = server.requests[-1][1]
    clock.advance(3599)
    crawl(store, settings, server, [item(1)], clock)
    assert server.count("R1") == 2
    clock.advance(1)
    crawl(store, settings, server, [item(1)], clock)            # attempt 3: found
    third = server.requests[-1][1]
    assert server.count("R1") == 3
    assert second - first >= 900 and third - second >= 3600
    assert queue_row(store, "R1")["state"] == "done"
    assert store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "R1"})["model_original"] == "MODEL R1"


def test_not_found_every_time_is_gone_only_after_five_attempts(store, settings):
    server = DetailServer({"R1": [404]})
    for attempt in range(1, 5):
        crawl(store, settings, server, [item(1)])
        row = queue_row(store, "R1")
        assert (row["state"], row["level"], row["attempts"]) == ("retry", attempt, attempt)
    result = crawl(store, settings, server, [item(1)])
    row = queue_row(store, "R1")
    assert row["state"] == "gone" and row["attempts"] == 5 and server.count("R1") == 5
    assert result.enrichment_stats["gone"] == 1


def test_full_run_requeues_gone_items(store, settings):
    server = DetailServer({"R1": [404, 404, 404, 404, 404, 200]})
    for _ in range(5):
        crawl(store, settings, server, [item(1)])
    assert queue_row(store, "R1")["state"] == "gone"
    crawl(store, settings, server, [item(1)])                   # incremental: gone stays gone
    assert server.count("R1") == 5
    result = crawl(store, settings, server, [item(1)], mode="full")
    assert result.enrichment_stats["requeued_gone"] == 1
    assert queue_row(store, "R1")["state"] == "done" and server.count("R1") == 6


def test_transient_failure_on_every_attempt_never_becomes_gone(store, settings):
    server = DetailServer({"R1": [503]})
    for _ in range(8):
        result = crawl(store, settings, server, [item(1)])
        assert result.status == "succeeded"
    row = queue_row(store, "R1")
    assert row["state"] == "pending" and row["level"] == 0
    assert row["transient_failures"] == 8 and row["attempts"] == 8
    assert "503" in row["last_error"]


def test_transient_failure_keeps_the_level_reached(store, settings):
    server = DetailServer({"R1": [404, 503]})
    crawl(store, settings, server, [item(1)])
    for _ in range(6):
        crawl(store, settings, server, [item(1)])
    row = queue_row(store, "R1")
    assert (row["state"], row["level"]) == ("retry", 1)


def test_transient_failure_waits_the_transient_delay(store, settings):
    clock = FakeClock()
    settings = settings.with_(transient_retry_delay_s=300.0)
    server = DetailServer({"R1": [503] * (1 + settings.max_retries) + [200]}, clock)  # one whole attempt fails
    crawl(store, settings, server, [item(1)], clock)
    requests_after_first = server.count("R1")
    assert queue_row(store, "R1")["state"] == "pending"
    clock.advance(299)
    crawl(store, settings, server, [item(1)], clock)
    assert server.count("R1") == requests_after_first
    clock.advance(1)
    crawl(store, settings, server, [item(1)], clock)
    assert queue_row(store, "R1")["state"] == "done"


def test_abandoned_claim_is_reclaimed_after_processing_timeout(store, settings):
    clock = FakeClock()
    server = DetailServer({"R1": [200]}, clock)
    crawl(store, settings.with_(enrich_limit=0), server, [item(1)], clock)   # list only, item queued
    claimer = LadderDemo(store, settings=settings, clock=clock)
    assert [i["record_key"] for i in enrichment.claim_due(claimer)] == ["R1"]   # …and the worker dies
    clock.advance(29 * 60)
    crawl(store, settings, server, [], clock)
    assert queue_row(store, "R1")["state"] == "processing" and server.count("R1") == 0
    clock.advance(60 + 1)
    result = crawl(store, settings, server, [], clock)
    assert result.enrichment_stats["reclaimed"] == 1
    assert queue_row(store, "R1")["state"] == "done"


@pytest.mark.slow
def test_process_killed_mid_lookup_leaves_item_reclaimable(tmp_path, store, settings):
    # A real process, killed with SIGKILL while its detail request hangs on a loopback server.
    crawl(store, settings.with_(enrich_limit=0), DetailServer({}), [item(1)])
    store.close()
    script = textwrap.dedent(f"""
        import sys; sys.path[:0] = [{str(REPO)!r}, {str(Path(__file__).parent)!r}]
        from test_enrichment import LadderDemo
        from basecrawler import Store
        from basecrawler.testing import fast_settings
        LadderDemo(Store({settings.db_path!r}), settings=fast_settings({settings.db_path!r}, timeout_s=60)).run()
    """)
    with LoopbackServer(lambda request: Reply(200, body='{"model": "LATE"}', delay_s=30)) as hanging:
        env = {**os.environ, "BASECRAWLER_LADDER_DETAIL_URL": hanging.url}
        child = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=tmp_path)
        try:
            deadline = time.monotonic() + 20
            while not hanging.requests and time.monotonic() < deadline:
                time.sleep(0.05)
            assert hanging.requests, "the child never asked for the detail"
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
    from basecrawler import Store
    reopened = Store(settings.db_path)
    try:
        assert queue_row(reopened, "R1")["state"] == "processing"
        later = FakeClock(time.time() + settings.processing_timeout_s + 1)
        result = crawl(reopened, settings, DetailServer({"R1": [200]}), [], later)
        assert result.enrichment_stats["reclaimed"] == 1
        assert queue_row(reopened, "R1")["state"] == "done"
    finally:
        reopened.close()


def test_claims_newest_recalls_first_and_at_most_the_limit(store, settings):
    server = DetailServer({f"R{n}": [200] for n in range(1, 6)})
    items = [item(n, date=f"2024-05-0{n}") for n in range(1, 6)]
    result = crawl(store, settings.with_(enrich_limit=2, enrich_workers=1), server, items)
    assert result.enrichment_stats["claimed"] == 2
    assert sorted(n for n, _ in server.requests) == ["R4", "R5"]


def test_record_whose_list_has_the_model_is_not_queued(store, settings):
    server = DetailServer({})
    crawl(store, settings, server, [item(1, model="FROM LIST"), item(2)])
    assert [r["record_key"] for r in store.query("SELECT record_key FROM enrichment")] == ["R2"]


def test_settled_item_is_not_asked_again_on_the_next_list_crawl(store, settings):
    # "empty" leaves the model missing, so only the queue state stops a second lookup.
    server = DetailServer({"R1": [204, 200]})
    crawl(store, settings, server, [item(1)])
    crawl(store, settings, server, [item(1)])
    assert server.count("R1") == 1 and queue_row(store, "R1")["state"] == "empty"


def test_detail_without_fields_marks_item_empty(store, settings):
    server = DetailServer({"R1": [204]})
    result = crawl(store, settings, server, [item(1)])
    assert queue_row(store, "R1")["state"] == "empty" and result.enrichment_stats["empty"] == 1


def test_detail_does_not_erase_stored_values(store, settings):
    server = DetailServer({"R1": [200]})                 # the detail answers no summary
    crawl(store, settings, server, [item(1)])
    row = store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "R1"})
    assert row["summary_original"] == "Summary 1" and row["model_original"] == "MODEL R1"


def test_detail_that_adds_an_original_queues_the_row_for_translation(store, settings):
    crawl(store, settings.with_(enrich_limit=0), DetailServer({}), [item(1)])
    store.write(lambda db: db.conn.execute(
        dialect_of(db.conn).write("UPDATE recalls SET summary_ko = '요약', translated_at = '2024-01-01T00:00:00+00:00', "
        "translation_status = 'translated'")))
    crawl(store, settings, DetailServer({"R1": [200]}), [])
    row = store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "R1"})
    assert row["model_original"] == "MODEL R1"
    assert row["translated_at"] is None and row["summary_ko"] == "요약"


def test_unusable_detail_is_dead_lettered_once_and_stays_queued(store, settings):
    server = DetailServer({"R1": ["html"]})
    for _ in range(3):
        crawl(store, settings, server, [item(1)])
    letters = store.dead_letters.open_dead_letters("ladder")
    assert len(letters) == 1 and server.count("R1") == 3
    assert (letters[0]["stage"], letters[0]["kind"], letters[0]["record_key"]) == ("detail", "unexpected", "R1")
    assert letters[0]["raw_kind"] == "bytes" and b"maintenance" in letters[0]["raw_bytes"]   # the body is kept
    row = queue_row(store, "R1")
    assert (row["state"], row["level"]) == ("pending", 0)


def test_detail_dead_letter_is_resolved_when_the_detail_later_succeeds(store, settings):
    server = DetailServer({"R1": ["html", 200]})
    crawl(store, settings, server, [item(1)])
    assert len(store.dead_letters.open_dead_letters("ladder")) == 1
    crawl(store, settings, server, [item(1)])
    assert queue_row(store, "R1")["state"] == "done" and store.dead_letters.open_dead_letters("ladder") == []


def test_gone_items_show_in_status(store, settings):
    server = DetailServer({"R1": [404], "R2": [200]})
    for _ in range(5):
        crawl(store, settings, server, [item(1), item(2)])
    report = collect_status(store, ["ladder"])
    assert report["sources"]["ladder"]["enrichment"] == {"done": 1, "gone": 1}


def test_gone_is_logged_as_an_error(store, settings, caplog):
    server = DetailServer({"R1": [404]})
    for _ in range(5):
        crawl(store, settings, server, [item(1)])
    gone = [r for r in caplog.records if "marked gone" in r.getMessage()]
    assert len(gone) == 1 and gone[0].levelname == "ERROR" and "R1" in gone[0].getMessage()


def test_blocked_host_stops_lookups_fails_the_run_and_costs_no_level(store, settings):
    server = DetailServer({f"R{n}": [403] for n in range(1, 21)})
    result = crawl(store, settings.with_(enrich_workers=1), server, [item(n) for n in range(1, 21)])
    assert result.status == "failed" and "blocked" in result.error
    rows = store.query("SELECT state, level FROM enrichment")
    assert all(r["level"] == 0 and r["state"] == "pending" for r in rows)
    assert len({n for n, _ in server.requests}) < 20


def test_detail_lookups_run_in_parallel(store, settings):
    # The behaviour, not a speed: detail requests overlap, and never more of them than the
    # configured workers. Each request waits (up to 5 s) until another one is in flight, so
    # the overlap is seen however slowly a loaded machine starts the threads; serial lookups
    # give up that wait once and the assertion below fails.
    lock = threading.Lock()
    overlapped = threading.Event()
    state = {"in_flight": 0, "max": 0, "gave_up": False}

    def handler(request):
        with lock:
            state["in_flight"] += 1
            state["max"] = max(state["max"], state["in_flight"])
            if state["in_flight"] >= 2:
                overlapped.set()
        try:
            if not state["gave_up"] and not overlapped.wait(5):
                state["gave_up"] = True
            time.sleep(0.01)
            return httpx.Response(200, json={"model": "M"})
        finally:
            with lock:
                state["in_flight"] -= 1

    workers = 3
    crawler = LadderDemo(store, items=[item(n) for n in range(8)], settings=settings.with_(enrich_workers=workers),
                         transport=httpx.MockTransport(handler))
    result = crawler.run()
    assert result.enrichment_stats["done"] == 8
    assert 2 <= state["max"] <= workers, state


def test_parallel_lookups_share_one_store_without_breaking_transactions(store, settings):
    # Workers archive every response through the shared connection while the main thread
    # applies results; 60 lookups over 8 threads used to break a COMMIT now and then.
    server = DetailServer({f"R{n}": [200] for n in range(60)})
    result = crawl(store, settings.with_(enrich_workers=8), server, [item(n) for n in range(60)])
    assert result.status == "succeeded", result.error
    assert result.enrichment_stats["done"] == 60 and store.dead_letters.open_dead_letters("ladder") == []
