"""The web view's search and lanes at scale (issue #34.6, w11): every type's search reads its
full-text index, a search with filters walks the date index, a search's summary takes the
background lane (not its page's), whole-table facet counts never hold a page past its
budget, heavy and background SQL runs at a lower CPU priority, and the lanes' answers come
from the catalogue in the request's language. bench/bench_web_attack.py measures the same at
a million records; here small stores, in-process or on loopback.
"""
import asyncio
import os
import sqlite3
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")

from basecrawler import i18n  # noqa: E402
from basecrawler.reading.browse import WEB_DIR, build_metadata  # noqa: E402
from basecrawler.reading.web import limits  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import read_data  # noqa: E402
import web_attack_data  # noqa: E402

RECALLS = 3_000       # above search.WALK_MIN: a term in every record is walked
ALERTS = 300


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("lanes") / "lanes.db")
    read_data.generate_sqlite(path, RECALLS)

    def alert_rows(first, size):
        for row in web_attack_data.rows(first, size):
            row = list(row)
            if row[2] == "A00000007":   # a cased letter outside ASCII: LIKE does not fold it, the index does
                row[web_attack_data.COLUMNS.index("title_original")] = "äpfelmus recalled"
            yield tuple(row)
    read_data.bulk_insert(path, "product_alerts", web_attack_data.COLUMNS, alert_rows, ALERTS)
    return path


def _pages(db_path: str, paths: list[str], between=None) -> list:
    """The responses of `paths` from one in-process Datasette with the web view's plugins;
    `between(index)` is awaited before each path (a pause, a check)."""
    from datasette.app import Datasette

    async def fetch():
        ds = Datasette([db_path], metadata=build_metadata(db_path), plugins_dir=str(WEB_DIR / "plugins"),
                       template_dir=str(WEB_DIR / "templates"))
        out = []
        for n, path in enumerate(paths):
            if between is not None:
                await between(n)
            out.append(await ds.client.get(path))
        return out
    return asyncio.run(fetch())


def test_every_type_searches_its_full_text_index(store_path):
    """A product alert titled "äpfelmus" is found by "ÄPFELMUS": the trigram index folds every
    letter's case, LIKE (the web view's old search of types other than the default) only ASCII."""
    (page,) = _pages(store_path, ["/lanes/product_alerts.json?_shape=objects&_col=alert_id&_search="
                                  + urllib.parse.quote("ÄPFELMUS")])
    assert page.status_code == 200
    assert [row["alert_id"] for row in page.json()["rows"]] == ["A00000007"]


def test_a_search_with_a_filter_walks_the_date_index_and_finds_the_same_rows(store_path):
    """`brake` is in every record: in the default order the page tests it on each row of the
    newest-first walk (LIKE, not the full-text index's set of every match); an explicit sort
    collects the matches. The same rows either way."""
    walked, collected = _pages(store_path, [
        "/lanes/recalls.json?_shape=objects&_col=id&_size=1000&_search=brake&country=JP",
        "/lanes/recalls.json?_shape=objects&_col=id&_size=1000&_search=brake&country=JP&_sort=id"])
    sql = walked.json()["query"]["sql"]
    assert "SELECT rowid FROM" not in sql and "LIKE" in sql, sql
    assert "SELECT rowid FROM" in collected.json()["query"]["sql"]
    ids = sorted(row["id"] for row in walked.json()["rows"])
    assert ids == sorted(row["id"] for row in collected.json()["rows"]) and len(ids) == RECALLS // 5


def test_a_searchs_summary_takes_the_background_lane(store_path, monkeypatch):
    """Its two parts held the search lane's two slots while the next search's rows waited for
    one ("busy" with one reader at a million records)."""
    from basecrawler.reading import summary_cache

    lanes = []
    original = summary_cache.summarise_in

    async def recording(db, filters, *args, **kwargs):
        lanes.append(limits.LANE.get())
        return await original(db, filters, *args, **kwargs)
    monkeypatch.setattr(summary_cache, "summarise_in", recording)
    (page,) = _pages(store_path, ["/lanes/product_alerts.json?_search=choking"])
    assert page.status_code == 200 and lanes and set(lanes) == {"background"}, lanes


def test_whole_table_facets_do_not_hold_the_page(store_path, monkeypatch):
    """A whole-table facet count that takes long (seconds for a multi-valued facet at a million
    records) goes on in the background: the page answers within its facets' budget, showing
    them as still counting, and the next visit after the count shows them."""
    from basecrawler.reading.web import facetcache

    facetcache.forget()   # (the other tests' pages counted them in this process)
    original = facetcache.count_whole_table
    delay_s = 2.0

    async def slow(datasette, database, sql, *args, **kwargs):
        if "json_each" in sql and "GROUP BY" in sql:   # a multi-valued facet's count
            await asyncio.sleep(delay_s)
        return await original(datasette, database, sql, *args, **kwargs)
    monkeypatch.setattr(facetcache, "count_whole_table", slow)
    timings = []

    async def between(n):
        if n == 1:
            await asyncio.sleep(delay_s + 1.0)
        timings.append(time.perf_counter())
    path = "/lanes/product_alerts.json?_size=1&_nocount=1"
    first, later = _pages(store_path, [path, path], between)
    first_took = timings[1] - timings[0] - (delay_s + 1.0)
    assert first.status_code == 200 and first_took < delay_s, first_took
    assert "category" not in first.json()["facet_results"]
    assert later.status_code == 200 and {"category", "country"} <= set(later.json()["facet_results"])


@pytest.mark.skipif(not hasattr(os, "getpriority") or not limits.renice_allowed(),
                    reason="this process may not give a thread its priority back")
def test_heavy_and_background_sql_runs_at_a_lower_priority():
    seen = {}

    def work():
        tid = threading.get_native_id()
        base = os.getpriority(os.PRIO_PROCESS, tid)
        for lane in ("heavy", "background", "search", None):
            with limits.lane_priority(lane):
                seen[lane] = os.getpriority(os.PRIO_PROCESS, tid) - base
        seen["after"] = os.getpriority(os.PRIO_PROCESS, tid) - base
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen == {"heavy": limits.LANE_NICE["heavy"], "background": limits.LANE_NICE["background"],
                    "search": 0, None: 0, "after": 0}


def test_the_lanes_answers_are_in_the_catalogue_in_the_readers_language():
    korean = i18n.catalogue("ko")
    for key, text in limits.LANE_MESSAGES.items():
        entry = korean.get(text)
        assert entry is not None and entry.string and entry.string != text, key
        assert limits.message(key, "en", seconds="0.8") == text % {"seconds": "0.8"} if "%(" in text else text
    assert "잠시" not in limits.message("busy", "en") and "초 뒤에" in limits.message("busy", "ko")
    assert limits.reader_language([("_lang", "en")], None) == "en"
    assert limits.reader_language([], "x=1; bc_lang=en") == "en"
    assert limits.reader_language([], 'bc_lang="; ;') is None and limits.reader_language([], None) is None
    status, text = limits.explain(Exception("interrupted"), 0.8)
    assert status == 400 and "0.8" in text


def test_busy_is_said_in_the_requests_language(store_path, monkeypatch):
    """A heavy request that finds no slot is told "busy" before the view's language plugin has
    read the request: in Korean by default, in English when it asks for English (`_lang`, or
    its cookie). (No slot at all here, so every heavy request is told so.)"""
    monkeypatch.setitem(limits.SLOTS, "heavy", 0)
    path = "/lanes/recalls.json?_sort=remedy_original"
    korean, english = _pages(store_path, [path, path + "&_lang=en"])
    assert korean.status_code == 503 and korean.json()["error"] == limits.message("busy", "ko")
    assert english.status_code == 503 and english.json()["error"] == limits.LANE_MESSAGES["busy"]
    assert korean.json()["error"] != english.json()["error"]


def test_filtered_pages_counts_never_push_out_the_whole_tables():
    """A client sending filtered pages over and over (each counts its facets into the cache)
    made every visitor of the table page count the whole table again: seconds per
    multi-valued facet at a million records."""
    from basecrawler.reading.web import facetcache

    class Rows:
        rows: list = []

    class Database:
        async def execute_fn(self, fn):
            return fn(sqlite3.connect(":memory:"))

    class Datasette:
        async def execute(self, *args, **kwargs):
            return Rows()

        def get_database(self, name):
            return Database()

    async def fill():
        facetcache.forget()
        whole = ("db", "SELECT 'x' AS value, 1 AS count", "[]", (1,))
        await facetcache.count_once(Datasette(), whole, whole[1], [], 1000, whole=True)
        for n in range(facetcache.CACHE_SIZE + 50):
            await facetcache.count_once(Datasette(), ("db", "SELECT filtered", f"[{n}]", (1,)), "SELECT filtered", [n], 100)
        return whole
    whole = asyncio.run(fill())
    assert facetcache.cached(whole) == [{"value": "x", "count": 1}]
    assert len(facetcache.filtered_counts) == facetcache.CACHE_SIZE and len(facetcache.whole_counts) == 1
    facetcache.forget()


def test_new_pages_never_push_out_the_counts_of_a_page_asked_again():
    """Every attacker's page is new, and each counted its facets into the cache: a reader's
    filtered page (a maker, a country, a search with a filter), visited again, found its counts
    gone and counted them again within its facet budget on a machine the attack kept busy: the
    slow reader pages under attack. A page asked again now keeps its counts apart."""
    from basecrawler.reading.web import facetcache

    class Datasette:
        async def execute(self, *args, **kwargs):
            class Rows:
                rows: list = []
            return Rows()

    class Request:
        def __init__(self, query: str):
            self.path, self.query_string, self.scope = "/db/recalls", query, {}

    async def fill():
        facetcache.forget()
        reader = ("db", "SELECT country", "[\"JP\"]", (1,))
        assert not facetcache.asked_again(Request("country=JP"))          # the first visit …
        await facetcache.count_once(Datasette(), reader, reader[1], ["JP"], 100)
        visit = Request("country=JP")
        assert facetcache.asked_again(visit) and facetcache.asked_again(visit)   # … and the next
        assert facetcache.cached(reader, again=True) == []               # moved to the kept table
        for n in range(facetcache.CACHE_SIZE + 50):                      # new pages, each asked once
            page = Request(f"q={n}")
            key = ("db", "SELECT filtered", f"[{n}]", (1,))
            await facetcache.count_once(Datasette(), key, key[1], [n], 100, again=facetcache.asked_again(page))
        return reader
    reader = asyncio.run(fill())
    assert facetcache.cached(reader) == [] and reader in facetcache.repeat_counts
    assert len(facetcache.filtered_counts) == facetcache.CACHE_SIZE and len(facetcache.repeat_counts) == 1
    facetcache.forget()


def test_a_filtered_page_visited_again_keeps_its_counts_in_the_kept_table(store_path):
    """The web view's facets (plugins/basecrawler_facets.py) ask the cache as the page they
    count for: its first visit's counts are a new page's, its second visit keeps them."""
    from basecrawler.reading.web import facetcache
    (shown,) = _pages(store_path, ["/lanes/recalls?country=JP&_search=brake"])
    page = shown.headers.get("location", "/lanes/recalls?country=JP&_search=brake")   # (its columns added)
    facetcache.forget()

    async def between(n):
        if n == 1:
            assert [key for key in facetcache.filtered_counts if "JP" in key[2]]
            assert not facetcache.repeat_counts
    first, again = _pages(store_path, [page, page], between)
    assert (first.status_code, again.status_code) == (200, 200)
    assert [key for key in facetcache.repeat_counts if "JP" in key[2]]
    facetcache.forget()


def test_a_page_asked_again_has_its_counts_finished_whatever_new_pages_left_waiting():
    """A reader's maker page counted its month facet past its budget on every visit under
    attack, and the count was never finished for the next visit: the attackers' new pages held
    the background allowance. A page asked again has an allowance of its own, and its count is
    the warm-up's kind of work (its lane of one, the background's priority: admission.WARMING)."""
    from basecrawler.reading.web import admission, facetcache
    seen, gate, slow = [], [], [False]
    sql = "SELECT 'x' AS value, 1 AS count WHERE ? IS NOT NULL"

    class Database:
        async def execute_fn(self, fn):
            seen.append((limits.LANE.get(), admission.WARMING.get()))
            if slow[0]:
                await gate[0]
            return fn(sqlite3.connect(":memory:"))

    class Datasette:
        def get_database(self, name):
            return Database()

        async def execute(self, *args, **kwargs):
            seen.append(("new", limits.LANE.get()))

            class Rows:
                rows: list = []
            return Rows()

    async def run():
        facetcache.forget()
        loop = asyncio.get_running_loop()
        gate.append(loop.create_future())
        held = {("db", "SELECT new", f"[{n}]", (1,)): loop.create_future() for n in range(facetcache.BACKGROUND_COUNTS)}
        facetcache.pending.update(held)   # the attackers' pages' counts, going on
        try:
            new, again = ("db", sql, "[\"X\"]", (1,)), ("db", sql, "[\"HONDA\"]", (1,))
            token = limits.LANE.set("search")   # (whatever the page's lane)
            try:
                facetcache.finish_later(Datasette(), new, sql, ["X"], 1000, again=False)
                facetcache.finish_later(Datasette(), again, sql, ["HONDA"], 1000, again=True)
            finally:
                limits.LANE.reset(token)
            await asyncio.sleep(0.05)
            assert new not in facetcache.pending and facetcache.cached(new) is None   # not started
            assert facetcache.cached(again) == [{"value": "x", "count": 1}] and again in facetcache.repeat_counts
            assert seen == [(None, True)]
            # Its own allowance is bounded too: while as many are going on, no further one starts.
            slow[0] = True
            going = [("db", sql, f"[{n}]", (2,)) for n in range(facetcache.BACKGROUND_COUNTS + 1)]
            for key in going:
                facetcache.finish_later(Datasette(), key, sql, [key[2]], 1000, again=True)
            await asyncio.sleep(0.05)
            assert [key in facetcache.pending for key in going] == [True] * facetcache.BACKGROUND_COUNTS + [False]
            gate[0].set_result(None)
            await asyncio.sleep(0.05)
            assert all(facetcache.cached(key) for key in going[:-1])
        finally:
            for key, future in held.items():
                facetcache.pending.pop(key)
                future.cancel()
            facetcache.forget()
    asyncio.run(run())


def test_a_returning_page_neither_counts_nor_waits_again_for_a_count_that_ran_out(store_path, monkeypatch):
    """Under attack a reader's filtered page spent its whole facet budget, visit after visit, on
    a count that had run out of a page's time before, until it was finished in the background.
    Asked again, the page has it finished for its next visit and shows it as still counting at
    once: the page's own count of it is made once."""
    from datasette.app import Datasette
    from datasette.database import QueryInterrupted
    from datasette.plugins import pm

    from basecrawler.reading.web import facetcache
    facetcache.forget()
    ds = Datasette([store_path], metadata=build_metadata(store_path), plugins_dir=str(WEB_DIR / "plugins"))
    facets = next(p for p in pm.get_plugins() if hasattr(p, "ValuesFacet"))
    counted, finishing, count = [], [], facets.count_once

    async def month_runs_out(datasette, key, sql, params, limit_ms, **options):
        if "substr(" in sql and not options.get("whole"):   # the page's month facet: longer than it may wait
            counted.append(sql)
            raise QueryInterrupted(None, sql, params)
        return await count(datasette, key, sql, params, limit_ms, **options)
    monkeypatch.setattr(facets, "count_once", month_runs_out)
    monkeypatch.setattr(facets, "finish_later", lambda *args: finishing.append(args[-1]))

    async def visits():
        return [await ds.client.get("/lanes/recalls.json?country=JP&_extra=facet_results") for _ in range(3)]
    pages = asyncio.run(visits())
    assert [page.status_code for page in pages] == [200, 200, 200]
    assert len(counted) == 1                        # the first visit's own count only
    assert finishing == [False, True, True]         # then finished for the next visit, each time asked
    facetcache.forget()


def test_a_whole_table_count_has_its_own_time_limit(store_path, monkeypatch):
    """Datasette's `custom_time_limit` only shortens its page limit: the whole-table count,
    given 20 s, stopped at the page's 3 s on a loaded machine and every visitor counted again."""
    from datasette.app import Datasette

    from basecrawler.reading.web import facetcache

    async def count():
        ds = Datasette([store_path], settings={"sql_time_limit_ms": 50})
        slow = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) "
                "SELECT 'n' AS value, count(*) AS count FROM c")
        return await facetcache.count_once(ds, ("lanes", slow, "[]", (2,)), slow, [], 20_000, whole=True)
    assert asyncio.run(count()) == [{"value": "n", "count": 3_000_000}]
    facetcache.forget()


def test_a_search_with_a_filter_over_a_large_table_is_not_counted_and_says_so(store_path, monkeypatch):
    """Counting every match of a common term that also passes a filter ran into the search
    lane's limit before the page answered: over a large table the page is not counted and says
    why, in the reader's language (a small one is counted as before)."""
    from datasette.app import Datasette
    from datasette.plugins import pm

    Datasette([store_path], metadata=build_metadata(store_path), plugins_dir=str(WEB_DIR / "plugins"))
    web = next(p for p in pm.get_plugins() if hasattr(p, "SUMMARY_COUNT_ROWS"))
    path = "/lanes/recalls.json?_col=id&_search=brake&country=JP"
    (counted,) = _pages(store_path, [path])
    monkeypatch.setattr(web, "SUMMARY_COUNT_ROWS", RECALLS // 2)
    spared, page = _pages(store_path, [path, path.replace(".json", "") + "&_lang=en"])
    assert counted.json()["filtered_table_rows_count"] == RECALLS // 5
    assert spared.json()["filtered_table_rows_count"] is None and len(spared.json()["rows"]) > 0
    assert "(not counted: counting a search with other filters" in page.text
