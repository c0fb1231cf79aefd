"""A search page whose summary is still counting shows its count and facets when they are
ready, without a reload (static/basecrawler.js polls plugins/basecrawler_facets.py's
/-/bc-summary); and the searches that were slow to count are counted again when a run changed
the data, before anyone asks (reading/summary.py `recount_slow`).

The summary is held (its count waits for an event) until the page has loaded and its script
has asked, so the facets can only appear through the script."""
import asyncio
import datetime as dt
import json
import shutil
import threading
import time
import urllib.request

import pytest

from basecrawler import Recall
from basecrawler.reading.search import RecallFilter
from summary_support import hold_summaries, stored_by_a_finished_run
from web_fixture import free_port

pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _recalls(n: int) -> list[Recall]:
    return [Recall(country=("JP", "US", "DE")[i % 3], recall_number=f"N{i:04d}",
                   recall_date=dt.date(2021, 1, 1) + dt.timedelta(days=i * 11),
                   summary_original=f"brake defect {i}" if i % 2 else f"fuel pump {i}",
                   manufacturer_original=("Ford", "トヨタ")[i % 2]) for i in range(60)]


@pytest.fixture
def filled(store):
    return stored_by_a_finished_run(store, _recalls(60))


@pytest.fixture
def fresh_summaries(monkeypatch):
    import basecrawler.reading.summary_cache as summary_cache

    from cachetools import LRUCache

    for name in ("_summarising", "_wait_until"):
        monkeypatch.setattr(summary_cache, name, {})
    monkeypatch.setattr(summary_cache, "_summaries", LRUCache(summary_cache.SUMMARY_CACHE_SIZE))
    monkeypatch.setattr(summary_cache, "_slow", LRUCache(summary_cache.RECOUNT_MAX))
    return summary_cache


@pytest.fixture
def held(fresh_summaries, monkeypatch):
    """An event: every summary's count waits for it."""
    import basecrawler.reading.summary as summary_module

    release = hold_summaries(monkeypatch, summary_module, timeout=60)
    yield release
    release.set()


def _datasette(db_path):
    from datasette.app import Datasette

    from basecrawler.reading.browse import STATIC_MOUNT, WEB_DIR, build_metadata

    return Datasette([db_path], metadata=build_metadata(db_path), plugins_dir=str(WEB_DIR / "plugins"),
                     template_dir=str(WEB_DIR / "templates"), static_mounts=[(STATIC_MOUNT, str(WEB_DIR / "static"))],
                     settings={"suggest_facets": False, "default_facet_size": 6})


def _plugin(attribute: str):
    from datasette.plugins import pm

    return next(p for p in pm.get_plugins() if hasattr(p, attribute))


def test_the_summary_endpoint_says_when_a_searchs_counts_are_ready(filled, db_path, held, monkeypatch):
    async def scenario():
        ds = _datasette(db_path)
        monkeypatch.setattr(_plugin("summary_state"), "POLL_WAIT_S", 0.05)
        await ds.invoke_startup()
        name = next(n for n in ds.databases if n != "_internal")
        waiting = await ds.client.get(f"/-/bc-summary/{name}/recalls?_search=fuel")
        held.set()
        ready = None
        for _ in range(200):
            ready = await ds.client.get(f"/-/bc-summary/{name}/recalls?_search=fuel")
            if ready.json()["ready"]:
                break
            await asyncio.sleep(0.05)
        other = await ds.client.get(f"/-/bc-summary/{name}/recalls?_search=fuel&country=JP")
        unknown = await ds.client.get(f"/-/bc-summary/{name}/nosuchtable?_search=fuel")
        return waiting, ready, other, unknown
    waiting, ready, other, unknown = asyncio.run(scenario())
    assert waiting.status_code == 200 and waiting.json() == {"ready": False}
    assert ready.json() == {"ready": True, "count": 30}
    assert waiting.headers["cache-control"] == "no-store"
    # Not a page that only searches a type's table: nothing to wait for.
    assert other.status_code == 404 and unknown.status_code == 404


class _InProcess:
    """The web view served by uvicorn on a thread of this process, so a test can hold its summary."""

    def __init__(self, ds):
        import uvicorn

        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(ds.app(), host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "the web view did not start"
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(30)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH: scripts/test installs it")
def test_a_page_shows_its_facets_when_its_summary_is_ready_without_a_reload(filled, db_path, held, monkeypatch,
                                                                            tmp_path):
    from test_web_view import chromium

    ds = _datasette(db_path)
    facets, web = _plugin("summary_state"), _plugin("RARE_SHORT_WAIT_S")
    monkeypatch.setattr(web, "SUMMARY_COUNT_ROWS", 0)   # count as a large table does: from the summary
    monkeypatch.setattr("basecrawler.reading.summary_cache.SUMMARY_WAIT_S", 0.05)
    polled = threading.Event()
    real_state = facets.summary_state

    async def spy(request, datasette):
        polled.set()
        return await real_state(request, datasette)
    monkeypatch.setattr(facets, "summary_state", spy)   # before the routes are made (ds.app())

    def release_once_asked():
        # Only the page's script asks: the page has loaded without its counts by then.
        if polled.wait(60):
            held.set()
    with _InProcess(ds) as url:
        name = next(n for n in ds.databases if n != "_internal")
        path = f"/{name}/recalls?_search=fuel&_col=recall_number&_lang=en"   # English words asserted
        with urllib.request.urlopen(url + path, timeout=30) as response:
            first = response.read().decode()
        assert "Still counting" in first and "the counts and facets follow" in first
        assert not polled.is_set()
        threading.Thread(target=release_once_asked, daemon=True).start()
        dom, console = chromium(tmp_path / "profile", url + path, "--dump-dom")
    assert not [line for line in console if "Content Security Policy" in line], console
    # The count line and every facet, put in by the script in place of the timed-out note.
    assert "Still counting" not in dom and "counting…" not in dom
    assert "(30 records)" in dom
    assert 'class="facet-results"' in dom and 'data-column="country"' in dom and 'data-column="recall_date"' in dom
    assert "Japan (JP)</a> 10" in dom   # (a country by its name in the page's language)
    assert polled.is_set() and held.is_set()


def test_slow_searches_are_counted_again_when_a_run_changed_the_data(filled, db_path, fresh_summaries, monkeypatch):
    """A search whose summary was slow is counted again, once no run is going, at the new data
    version, without anyone asking; a fast one is not; at most RECOUNT_MAX are kept."""
    summary_cache = fresh_summaries
    from datasette.app import Datasette

    async def scenario():
        ds = Datasette([db_path])
        await ds.invoke_startup()
        name = next(n for n in ds.databases if n != "_internal")
        monkeypatch.setattr(summary_cache, "RECOUNT_AFTER_S", -1)   # every summary counts as slow
        await summary_cache.cached_summary(ds, name, "recalls", RecallFilter(text="fuel"), wait_s=30)
        monkeypatch.setattr(summary_cache, "RECOUNT_AFTER_S", 60)
        await summary_cache.cached_summary(ds, name, "recalls", RecallFilter(text="defect"), wait_s=30)
        seen: dict = {}
        nothing_new = await summary_cache.recount_slow(ds, seen)
        run = filled.runs.start_run("test", "incremental", "running", 1)
        filled.upsert("vehicle_recall", [Recall(country="US", recall_number="LATE", recall_date="2024-05-01",
                                      summary_original="fuel leak late")], source="test")
        during_run = await summary_cache.recount_slow(ds, seen)
        filled.runs.update_run(run, status="succeeded", finished_at="2024-06-02T00:00:00+00:00")
        after_run = await summary_cache.recount_slow(ds, seen)
        marker = await summary_cache.run_marker(ds, name, "recalls")
        counted = {key[2].text: value.count for key, value in summary_cache._summaries.items() if key[3] == marker}
        # Asked now, the page needs no wait: it is there.
        ready = await summary_cache.cached_summary(ds, name, "recalls", RecallFilter(text="fuel"), wait_s=0)
        return nothing_new, during_run, after_run, counted, ready
    nothing_new, during_run, after_run, counted, ready = asyncio.run(scenario())
    assert (nothing_new, during_run, after_run) == (0, 0, 1)
    assert counted == {"fuel": 31} and ready is not None and ready.count == 31
    for n in range(summary_cache.RECOUNT_MAX + 3):
        summary_cache._remember_slow(("db", "recalls", RecallFilter(text=f"term{n}")))
    assert len(summary_cache._slow) == summary_cache.RECOUNT_MAX
    assert ("db", "recalls", RecallFilter(text=f"term{summary_cache.RECOUNT_MAX + 2}")) in summary_cache._slow


def test_a_search_page_reads_the_data_version_once(filled, db_path, fresh_summaries, monkeypatch):
    """Its count and every facet ask for the data version: read once per request."""
    from basecrawler.reading import facetcounts

    calls = []
    real = facetcounts.data_marker
    monkeypatch.setattr(facetcounts, "data_marker", lambda conn, table, now=None: calls.append(table) or
                        real(conn, table, now))

    async def scenario():
        ds = _datasette(db_path)

        async def no_warm_up(datasette):
            return None
        monkeypatch.setattr(_plugin("summary_state"), "_warm", no_warm_up)
        monkeypatch.setattr(_plugin("RARE_SHORT_WAIT_S"), "SUMMARY_COUNT_ROWS", 0)
        await ds.invoke_startup()
        name = next(n for n in ds.databases if n != "_internal")
        page = await ds.client.get(f"/{name}/recalls?_search=fuel&_col=recall_number&_lang=en")
        return page
    page = asyncio.run(scenario())
    assert page.status_code == 200 and "(30 records)" in page.text and 'data-column="country"' in page.text
    # Once for the page (its count and six facets asked for it seven times), once in the
    # summary (the kept whole-table counts are of which version).
    assert calls == ["recalls", "recalls"]


def test_short_index_looks_in_the_schema_once_per_connection(filled):
    from basecrawler.reading.search import short_index
    from basecrawler.recordtypes import get_record_type

    conn = filled.db.conn
    vehicle = get_record_type("vehicle_recall")
    assert short_index(conn, vehicle)
    statements = []
    conn.set_trace_callback(statements.append)
    try:
        assert short_index(conn, vehicle)
    finally:
        conn.set_trace_callback(None)
    assert not [s for s in statements if "FROM sqlite_master" in s], statements


def test_the_web_views_loop_recounts_a_slow_search_after_a_run(filled, db_path, fresh_summaries, monkeypatch):
    summary_cache = fresh_summaries
    from datasette.app import Datasette

    monkeypatch.setattr(summary_cache, "RECOUNT_EVERY_S", 0.02)
    monkeypatch.setattr(summary_cache, "RECOUNT_AFTER_S", -1)

    async def scenario():
        ds = Datasette([db_path])
        name = next(n for n in ds.databases if n != "_internal")
        await summary_cache.cached_summary(ds, name, "recalls", RecallFilter(text="fuel"), wait_s=30)
        loop = asyncio.create_task(summary_cache.keep_fresh(ds))
        await asyncio.sleep(0.1)   # it has seen the data as it is
        run = filled.runs.start_run("test", "incremental", "running", 1)
        filled.upsert("vehicle_recall", [Recall(country="US", recall_number="LATE", recall_date="2024-05-01",
                                      summary_original="fuel leak late")], source="test")
        filled.runs.update_run(run, status="succeeded", finished_at="2024-06-02T00:00:00+00:00")
        marker = await summary_cache.run_marker(ds, name, "recalls")
        found = None
        for _ in range(250):
            found = summary_cache._summaries.get((name, "recalls", RecallFilter(text="fuel"), marker))
            if found is not None:
                break
            await asyncio.sleep(0.02)
        loop.cancel()
        return found
    found = asyncio.run(scenario())
    assert found is not None and found.count == 31
