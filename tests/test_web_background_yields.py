"""Background work yields to readers' pages (issue #34.6 last line, web/admission.py
`pause_for_readers`): a summary's or a count's SQL pauses at its progress handler while
another request's light page is served, never for the page that started it, and at most
PAUSE_TOTAL_S in all. Directly on a connection, and through the guard's execute_fn in an
in-process Datasette over a small generated store."""
import asyncio
import sqlite3
import sys
import threading
import time
from pathlib import Path

import pytest

from basecrawler.reading.web import admission, limits

COUNTING = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) SELECT count(*) FROM c"
N = 300_000   # a few tens of milliseconds of SQL, looked at by the progress handler many times


def _background(origin, done: list):
    def run():
        conn = sqlite3.connect(":memory:")
        with limits.deadline(conn, 20, pause=admission.pause_for_readers(origin)):
            done.append(conn.execute(COUNTING, [N]).fetchone()[0])
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_background_sql_waits_while_another_page_is_served():
    done: list = []
    with admission.reading(origin=2):
        thread = _background(origin=1, done=done)
        time.sleep(0.5)
        assert not done and thread.is_alive()   # paused while the page is being served
    thread.join(timeout=10)
    assert done == [N]


def test_the_page_that_started_it_does_not_pause_it():
    done: list = []
    with admission.reading(origin=1):
        thread = _background(origin=1, done=done)
        thread.join(timeout=admission.PAUSE_TOTAL_S / 2)   # (paused, it would take PAUSE_TOTAL_S)
        assert done == [N]


def test_pauses_are_bounded(monkeypatch):
    monkeypatch.setattr(admission, "PAUSE_TOTAL_S", 0.2)
    done: list = []
    with admission.reading(origin=2):
        thread = _background(origin=1, done=done)
        thread.join(timeout=10)
        assert done == [N]   # ran on after pausing 0.2 s, the page still being served


def test_the_guard_pauses_a_pages_background_count_for_another_page(tmp_path):
    """Through Datasette's execute_fn as the guard replaces it: work in the background lane
    (limits.in_background, as a summary runs) waits for another request's light page."""
    pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")
    from datasette.app import Datasette

    from basecrawler.reading.browse import WEB_DIR, build_metadata
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import read_data

    path = str(tmp_path / "yield.db")
    read_data.generate_sqlite(path, 500)

    async def run():
        ds = Datasette([path], metadata=build_metadata(path), plugins_dir=str(WEB_DIR / "plugins"),
                       template_dir=str(WEB_DIR / "templates"))
        await ds.client.get("/yield/recalls.json?_size=1")   # started, its plugins loaded
        db = ds.get_database("yield")
        token = admission.ORIGIN.set(admission.new_origin())
        try:
            with admission.reading(origin=admission.new_origin()):   # another reader's page
                with limits.in_background():
                    task = asyncio.ensure_future(db.execute_fn(lambda conn: conn.execute(COUNTING, [N]).fetchone()[0]))
                await asyncio.sleep(0.5)
                during = task.done()
            return during, await asyncio.wait_for(task, 10)
        finally:
            admission.ORIGIN.reset(token)
    during, counted = asyncio.run(run())
    assert not during and counted == N


def test_a_light_pages_sql_counts_as_reading_but_not_the_rest_of_it_nor_a_poll(monkeypatch):
    """Background work pauses while a light page's SQL runs, not for the page's whole request:
    a page that waited for background work (a facet count another visit started) paused it
    for as long as it waited (up to PAUSE_TOTAL_S). The page's script's poll
    (`/-/bc-summary…`) waits for the very summary that would pause for it: never counted."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "basecrawler" / "reading" / "web" / "plugins"))
    import basecrawler_guard
    from datasette.app import Datasette

    memory = Datasette(memory=True)

    class _Datasette:
        def plugin_config(self, name):
            return {}
    seen = []

    async def app(scope, receive, send):
        seen.append(("outside", admission.readers_besides(None)))
        inside = await memory.get_database("_memory").execute_fn(lambda conn: admission.readers_besides(None))
        seen.append(("sql", inside))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def run(path):
        async def send(message):
            pass

        async def receive():
            return {"type": "http.request", "body": b""}
        await basecrawler_guard.asgi_wrapper(_Datasette())(app)(
            {"type": "http", "method": "GET", "path": path, "query_string": b"", "headers": [],
             "client": ("127.0.0.1", 1)}, receive, send)
    for path in ("/db/recalls", "/db/recalls/1", "/-/bc-summary/db/recalls"):
        asyncio.run(run(path))
    assert seen == [("outside", False), ("sql", True), ("outside", False), ("sql", True),
                    ("outside", False), ("sql", False)]


def test_a_filtered_page_waits_for_another_visits_count_only_within_its_budget(tmp_path):
    """The stall the attack bench showed (a filtered page answering after 4.9 s): a facet
    count another visit left to the background, still going, is awaited only within the
    page's facets budget; the page answers and shows those facets as still counting."""
    pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")
    from datasette.app import Datasette

    from basecrawler.reading.browse import WEB_DIR, build_metadata
    from basecrawler.reading.web import facetcache
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import read_data

    path = str(tmp_path / "waits.db")
    read_data.generate_sqlite(path, 500)
    page = "/waits/recalls?country=JP"

    async def run():
        ds = Datasette([path], metadata=build_metadata(path), plugins_dir=str(WEB_DIR / "plugins"),
                       template_dir=str(WEB_DIR / "templates"))
        await ds.client.get("/waits/recalls.json?_size=1")
        await asyncio.sleep(0.5)   # the start-up's whole-table counts
        before = set(facetcache.filtered_counts)
        first = await ds.client.get(page, follow_redirects=True)
        assert first.status_code == 200, (first.status_code, first.headers.get("location"))
        mine = [key for key in set(facetcache.filtered_counts) - before if key[0] == "waits" and "JP" in key[2]]
        assert mine   # the page's own facet counts, now cached
        loop = asyncio.get_running_loop()
        for key in mine:   # … as if another visit's count of each were still going
            facetcache.filtered_counts.pop(key)
            facetcache.pending[key] = loop.create_future()
        try:
            started = time.monotonic()
            response = await asyncio.wait_for(ds.client.get(page, follow_redirects=True), 10)
            return response.status_code, time.monotonic() - started
        finally:
            for key in mine:
                facetcache.pending.pop(key).cancel()
    status, took = asyncio.run(run())
    assert status == 200 and took < 2.0, took
