"""The start-up warm-up (plugins/basecrawler_facets.py `_warm`, web/admission.py WARMING) is
background work nobody waits for: its SQL runs one query at a time, pauses while another
reader's page runs its SQL, and at the background's CPU priority (a table's facet counts all at
once held Python's lock so often that a first visitor's page waited seconds to render). Through
the guard's execute_fn in an in-process Datasette."""
import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from basecrawler.reading.web import admission, limits

pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")

COUNTING = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) SELECT count(*) FROM c"
N = 300_000   # a few tens of milliseconds of SQL, looked at by the progress handler many times


def _plugin(attribute: str):
    from datasette.plugins import pm

    return next(p for p in pm.get_plugins() if hasattr(p, attribute))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A small generated store, made in a process of its own: the in-process servers of the
    tests before set SQLite's process-wide heap ceiling (web/limits.py `harden`), which the
    full-text build would meet."""
    path = str(tmp_path_factory.mktemp("warm") / "warm.db")
    bench = str(Path(__file__).resolve().parents[1] / "bench")
    subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {bench!r}); import read_data; "
                    f"read_data.generate_sqlite({path!r}, 2_000)"], check=True, capture_output=True, timeout=120)
    return path


async def _datasette(path):
    from datasette.app import Datasette

    from basecrawler.reading.browse import WEB_DIR, build_metadata
    ds = Datasette([path], metadata=build_metadata(path), plugins_dir=str(WEB_DIR / "plugins"),
                   template_dir=str(WEB_DIR / "templates"))
    await ds.invoke_startup()
    return ds, ds.get_database(Path(path).stem)


def _overlap(db, warming: bool, queries: int = 3) -> int:
    """The most of `queries` SQL calls started together that ran at the same time."""
    running, peak, lock = [0], [0], threading.Lock()

    def work(conn):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        try:
            time.sleep(0.1)
            return conn.execute("SELECT 1").fetchone()[0]
        finally:
            with lock:
                running[0] -= 1

    async def run():
        admission.WARMING.set(warming)   # (this task's own context)
        await asyncio.gather(*(db.execute_fn(work) for _ in range(queries)))
    return run(), peak


def test_the_warm_ups_sql_runs_one_query_at_a_time(store):
    async def scenario():
        ds, db = await _datasette(store)
        warm, warm_peak = _overlap(db, warming=True)
        await asyncio.create_task(warm)
        page, page_peak = _overlap(db, warming=False)   # a page's own: at once, as before
        await asyncio.create_task(page)
        return warm_peak[0], page_peak[0]
    assert asyncio.run(scenario()) == (1, 3)


def test_the_warm_ups_sql_pauses_while_another_readers_page_runs(store):
    async def scenario():
        ds, db = await _datasette(store)

        async def warm_up_count():
            admission.WARMING.set(True)
            return await db.execute_fn(lambda conn: conn.execute(COUNTING, [N]).fetchone()[0])
        token = admission.ORIGIN.set(admission.new_origin())
        try:
            with admission.reading(origin=admission.new_origin()):   # another reader's page
                task = asyncio.create_task(warm_up_count())
                await asyncio.sleep(0.5)
                during = task.done()
            return during, await asyncio.wait_for(task, 10)
        finally:
            admission.ORIGIN.reset(token)
    assert asyncio.run(scenario()) == (False, N)


@pytest.mark.skipif(not hasattr(os, "getpriority") or not limits.renice_allowed(),
                    reason="this process may not give a thread its priority back")
def test_the_warm_ups_sql_runs_at_the_backgrounds_priority(store):
    def niceness(conn):
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    async def scenario():
        ds, db = await _datasette(store)

        async def asked(warming: bool):
            admission.WARMING.set(warming)
            return await db.execute_fn(niceness)
        return await asyncio.create_task(asked(True)), await asyncio.create_task(asked(False))
    warm, page = asyncio.run(scenario())
    assert warm - page == limits.LANE_NICE["background"]


def test_the_start_up_warm_up_asks_as_the_warm_up(store, monkeypatch):
    """Every query `_warm` makes (the table pages' facets, counted in tasks of their own) is
    marked as the warm-up's, and it still counts every table's facets into the cache."""
    async def scenario():
        ds, db = await _datasette(store)
        from datasette.database import Database

        # The guard's wrapper installed in Database is the first load's of the plugins' folder
        # in this process (a later server's load may be another module object): spied on in
        # its own module's globals.
        guard = Database.execute_fn.__globals__
        facets = _plugin("summary_state")
        seen = []
        real = guard["_datasette_execute_fn"]

        async def spy(self, fn):
            seen.append(admission.WARMING.get())
            return await real(self, fn)
        monkeypatch.setitem(guard, "_datasette_execute_fn", spy)
        monkeypatch.setattr(facets, "_warmed_loops", [asyncio.get_running_loop()])   # only ours
        from basecrawler.reading.web import facetcache
        facetcache.forget()
        await asyncio.create_task(facets._warm(ds))
        warm_up = list(seen)
        counted = len(facetcache.whole_counts)
        page = await ds.client.get(f"/{db.name}/recalls.json?_size=0&_extra=facet_results&_nocount=1")
        return warm_up, counted, seen[len(warm_up):], page
    warm_up, counted, page_queries, page = asyncio.run(scenario())
    assert warm_up and all(warm_up) and counted >= 3
    assert page.status_code == 200 and page.json()["facet_results"]
    assert page_queries and not any(page_queries)   # a visitor's page is not the warm-up's
