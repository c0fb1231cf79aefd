"""A grouped table's page (each recall once, other publishers' copies left out) costs what a plain
one does (#31): its facets are the shown records' own counts, kept by the run like the whole
table's (reading/facetcounts.py `shown_table`), not the whole table's less the copies' (each copy's
wide row read once per facet); its count and the copies' number are counted once per data version
(reading/web/groupcounts.py), not on every page.

Over test_web_groups' store (an original publisher, two republishers, one group of three).
"""
from __future__ import annotations

import asyncio
import sqlite3

import pytest

from basecrawler.reading import facetcounts
from basecrawler.store import groups
from basecrawler.recordtypes import get_record_type

pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")

from test_web_groups import _copy_db, grouped  # noqa: E402,F401 — the module's store fixture

from basecrawler.reading.browse import WEB_DIR, build_metadata  # noqa: E402

ALERTS = get_record_type("product_alert")


def _plugin(name: str):
    from datasette.plugins import pm

    return next(p for p in pm.get_plugins() if hasattr(p, name))


def _datasette(db_path: str):
    from datasette.app import Datasette

    return Datasette([db_path], metadata=build_metadata(db_path), plugins_dir=str(WEB_DIR / "plugins"))


def _counts(response, facet: str) -> dict:
    results = response.json()["facet_results"]
    results = results.get("results", results)
    return {row["value"]: row["count"] for row in results[facet]["results"]}


def test_the_run_keeps_the_shown_records_counts_beside_the_whole_tables(grouped):
    db_path, _ids = grouped
    conn = sqlite3.connect(db_path)
    try:
        kept = facetcounts.count_whole_table(conn, ALERTS)["rows"]
        shown = facetcounts.shown_table(ALERTS.table)
        for sql in facetcounts.whole_table_queries(ALERTS, shown):
            # Each query of the grouped page, kept with the rows it gives over the shown records.
            cursor = conn.execute(sql)
            names = [d[0] for d in cursor.description]
            assert kept[sql] == [dict(zip(names, row)) for row in cursor.fetchall()]
        by_source = kept[facetcounts.values_sql("source", False, shown)]
        assert {r["value"]: r["count"] for r in by_source} == {"origdemo": 2, "repubdemo": 1}
        # A type without copies keeps only its whole table's.
        plain = get_record_type("vehicle_recall")
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", [plain.table]).fetchone():
            assert len(facetcounts.count_whole_table(conn, plain)["rows"]) == len(facetcounts.whole_table_queries(plain))
    finally:
        conn.close()


def test_the_grouped_table_page_counts_no_facet_when_the_run_kept_them(grouped, monkeypatch, tmp_path):
    from basecrawler.store.core import Store

    db_path = _copy_db(grouped[0], tmp_path / "keptshown.db")
    store = Store(db_path)
    try:
        facetcounts.store_whole_table_counts(store)   # as a run does when it ends (pipeline/runner.py)
    finally:
        store.close()
    ds = _datasette(db_path)
    facets = _plugin("ValuesFacet")
    counted, count = [], facets.count_once

    async def recording(datasette, key, sql, params, limit_ms, **options):
        if ALERTS.table in sql:   # (the start-up warm-up counts the other types' tables)
            counted.append(sql)
        return await count(datasette, key, sql, params, limit_ms, **options)
    monkeypatch.setattr(facets, "count_once", recording)

    async def fetch():
        return await ds.client.get("/keptshown/product_alerts.json?_col=source&_extra=facet_results")
    page = asyncio.run(fetch())
    # Every facet of the page from the counts the run kept: the copies' were never kept, and
    # subtracting them counted each facet over the copies at the first visit.
    assert counted == []
    assert _counts(page, "source") == {"origdemo": 2, "repubdemo": 1}
    assert _counts(page, "country") == {"CA": 2, "DE": 1}
    assert _counts(page, "alert_date") == {"2026-08": 2, "2026-07": 1}


def test_the_grouped_table_page_counts_the_shown_records_when_nothing_was_kept(grouped, monkeypatch, tmp_path):
    db_path = _copy_db(grouped[0], tmp_path / "notkept.db")
    with sqlite3.connect(db_path) as conn:
        conn.execute("DELETE FROM meta WHERE key LIKE ?", [facetcounts.META_PREFIX + "%"])
    ds = _datasette(db_path)
    facets = _plugin("ValuesFacet")
    counted, count = [], facets.count_once

    async def recording(datasette, key, sql, params, limit_ms, **options):
        if ALERTS.table in sql:
            counted.append(sql)
        return await count(datasette, key, sql, params, limit_ms, **options)
    monkeypatch.setattr(facets, "count_once", recording)

    async def fetch():
        return [await ds.client.get(path) for path in ("/notkept/product_alerts.json?_col=source&_extra=facet_results",
                                                        "/notkept/product_alerts.json?_col=source&_extra=facet_results"
                                                        "&_bc_copies=1")]
    once, every = asyncio.run(fetch())
    # Counted over the shown records, once per query; never over the copies to subtract them.
    shown = f"({facetcounts.shown_table(ALERTS.table)})"
    assert any(shown in sql for sql in counted) and not any("IS NOT NULL)" in sql for sql in counted)
    assert _counts(once, "source") == {"origdemo": 2, "repubdemo": 1}
    assert _counts(every, "source") == {"origdemo": 2, "repubdemo": 2, "mirrordemo": 1}
    assert _counts(once, "country") == {"CA": 2, "DE": 1} and _counts(every, "country") == {"CA": 4, "DE": 1}


def test_the_page_count_and_copies_are_counted_once_per_data_version(grouped, monkeypatch, tmp_path):
    from datasette.app import Datasette

    db_path = _copy_db(grouped[0], tmp_path / "onceper.db")
    ds = Datasette([db_path], metadata=build_metadata(db_path), plugins_dir=str(WEB_DIR / "plugins"),
                   template_dir=str(WEB_DIR / "templates"))
    from basecrawler.reading.web import groupcounts

    calls, copies = [], groupcounts.copies_count

    def counting(conn, record_type):
        if record_type.name == ALERTS.name:   # (the start-up warm-up visits every type's table)
            calls.append(record_type.name)
        return copies(conn, record_type)
    monkeypatch.setattr(groupcounts, "copies_count", counting)

    async def pages(n: int):
        return [(await ds.client.get("/onceper/product_alerts?_col=source&_col=alert_id")).text for _ in range(n)]
    first = asyncio.run(pages(3))
    assert calls == ["product_alert"]
    assert all('<h3 class="bc-count">3건' in page for page in first)
    # A new record is a new data version: counted again, and the page's count follows it.
    with sqlite3.connect(db_path) as conn:
        cursor = conn.execute("SELECT * FROM product_alerts WHERE source = 'origdemo' LIMIT 1")
        row = dict(zip([d[0] for d in cursor.description], cursor.fetchone()))
        row.pop("id")
        row["alert_id"] = "new-1"
        conn.execute(f"INSERT INTO product_alerts ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                     list(row.values()))
    again = asyncio.run(pages(1))
    assert calls == ["product_alert", "product_alert"]
    assert '<h3 class="bc-count">4건' in again[0]


def test_a_summary_takes_the_shown_records_kept_counts_not_the_copies(db_path, store, monkeypatch):
    """A term in most records is counted as the kept counts less the records without it: on a
    grouped store the kept counts are the shown records' own, so the copies are never read."""
    from basecrawler.reading import summary as summary_module
    from basecrawler.reading.search import RecallFilter
    from test_groups_plans import grouped_many

    grouped_many(db_path)
    facetcounts.store_whole_table_counts(store)
    monkeypatch.setattr(summary_module, "IDS_MAX", 5)   # (so few records count as "too many for ids")
    conn = store.db.conn
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        shown = summary_module.summarise(conn, RecallFilter(text="Peanut", record_type=ALERTS.name))
    finally:
        conn.set_trace_callback(None)
    assert (shown.count, shown.values["country"]) == (35, {"CA": 30, "DE": 5})
    assert statements and not any(f"{groups.COPIES}" in sql for sql in statements)
