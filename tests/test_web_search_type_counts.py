"""A search page's line of every type's matches (plugins/basecrawler_web.py `search_groups`):
the types are counted at once, and a search seen again at the same data version is not
counted again; a count that could not finish is left out and tried again next time, or for a
search asked again finished for its next visit."""
import asyncio
import sqlite3
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "basecrawler" / "reading" / "web" / "plugins"))
import basecrawler_web as web   # noqa: E402  (Datasette loads it from the plugins folder)
from web_fixture import fill   # noqa: E402

COUNT_S = 0.2


class _Row(dict):
    pass


class _Results:
    def __init__(self, n):
        self.n = n

    def first(self):
        return {"n": self.n}


class _Db:
    def __init__(self, conn, fail=()):
        self.conn, self.counted, self.fail = conn, [], set(fail)

    async def table_names(self):
        return [r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]

    async def execute_fn(self, fn):
        return fn(self.conn)

    async def execute(self, sql, params=None, custom_time_limit=None):
        await asyncio.sleep(COUNT_S)   # a count that takes its time
        table = next(t for t in web.TYPES if f"[{t}]" in sql or f" {t} " in sql)
        self.counted.append(table)
        if table in self.fail:
            raise sqlite3.OperationalError("interrupted")
        return _Results(len(self.counted))


class _Urls:
    def table(self, database, table):
        return f"/{database}/{table}"


class _Datasette:
    urls = _Urls()

    def __init__(self, db):
        self.db = db

    def get_database(self, name):
        return self.db


def _groups(db, text="brake", now=1_000_000.0):
    started = time.perf_counter()
    found = asyncio.run(web.search_groups(_Datasette(db), "w", "recalls", text, clock=lambda: now))
    return found, time.perf_counter() - started


def test_every_type_is_counted_at_once_and_kept_for_the_same_data(tmp_path):
    web._group_counts.clear()
    conn = sqlite3.connect(fill(tmp_path / "w.db"))
    db = _Db(conn)
    first, took = _groups(db)
    types = len(db.counted)
    assert types >= 2 and took < COUNT_S * types * 0.75   # not one after the other
    assert {g["table"] for g in first} == set(db.counted)
    again, took = _groups(db)
    assert again == first and len(db.counted) == types and took < COUNT_S
    _groups(db, "other words")
    assert len(db.counted) == 2 * types   # another search is counted
    conn.execute("INSERT INTO recalls (id, country, recall_number, source, recall_date) VALUES (999999, 'US', 'NEW-1', 'us', '2024-01-01')")
    conn.commit()
    _groups(db)
    assert len(db.counted) == 3 * types   # new records of the page's type: counted again
    _groups(db, now=1_000_000.0 + web.GROUP_COUNTS_TTL_S)
    assert len(db.counted) == 4 * types   # and the others' at most this long after


def test_a_count_that_failed_is_left_out_and_tried_again(tmp_path):
    web._group_counts.clear()
    conn = sqlite3.connect(fill(tmp_path / "w.db"))
    db = _Db(conn, fail={"product_alerts"})
    if "product_alerts" not in asyncio.run(db.table_names()):
        pytest.skip("no product_alerts table in this store")
    found, _ = _groups(db)
    assert "product_alerts" not in {g["table"] for g in found}
    before = db.counted.count("product_alerts")
    _groups(db)
    assert db.counted.count("product_alerts") == before + 1


class _Request:
    path, query_string = "/w/recalls", "_search=brake"

    def __init__(self):
        self.scope = {}


def test_a_returning_searchs_count_is_finished_for_its_next_visit_as_warm_up_work(tmp_path):
    """A reader's common term ran its count of a type to the page's limit on every visit under
    attack (left out, tried again, the page slow each time). A search asked again has the count
    finished for its next visit, as the warm-up's kind of work (admission.WARMING: its lane of
    one, the background's priority), and does not count it itself meanwhile."""
    from basecrawler.reading.web import admission, facetcache, limits
    web._group_counts.clear()
    facetcache.forget()
    conn = sqlite3.connect(fill(tmp_path / "w.db"))
    seen = []

    class Db(_Db):
        async def execute(self, sql, params=None, custom_time_limit=None):
            if "[product_alerts]" in sql or " product_alerts " in sql:
                seen.append((custom_time_limit, limits.LANE.get(), admission.WARMING.get()))
                if custom_time_limit == web.GROUP_COUNT_LIMIT_MS:   # the page's own count: too slow
                    raise sqlite3.OperationalError("interrupted")
            return await super().execute(sql, params, custom_time_limit)
    db = Db(conn)
    if "product_alerts" not in asyncio.run(db.table_names()):
        pytest.skip("no product_alerts table in this store")

    async def visits():
        token = limits.LANE.set("search")   # (the page's lane)
        try:
            tables = []
            for _ in range(3):
                found = await web.search_groups(_Datasette(db), "w", "recalls", "brake", request=_Request(),
                                                clock=lambda: 1_000_000.0)
                tables.append({g["table"] for g in found})
                await asyncio.sleep(COUNT_S * 2)   # (the finishing count takes its time)
            return tables
        finally:
            limits.LANE.reset(token)
    first, second, third = asyncio.run(visits())
    assert "product_alerts" not in first and "product_alerts" not in second and "product_alerts" in third
    # first visit: its own count only; the second: its own, then the finishing one; the third: none
    assert seen == [(web.GROUP_COUNT_LIMIT_MS, "search", False), (web.GROUP_COUNT_LIMIT_MS, "search", False),
                    (web.FINISH_LIMIT_MS, None, True)]
    web._group_counts.clear()
    facetcache.forget()
