"""The web view's first visit after the data changed (#23.5): the whole-table facet counts a
run keeps when it ends are the ones the facet queries count, and the table page shows them
instead of counting; counts of older data are never shown; a search page waits for its
one-pass summary once, not once per facet."""
import asyncio
import datetime as dt
import json
import time

import pytest

from basecrawler import Recall
from basecrawler.reading import facetcounts, summary_cache
from basecrawler.reading.search import RecallFilter
from record_types.vehicle_recall import VEHICLE_RECALL
from summary_support import hold_summaries, stored_by_a_finished_run

pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")


def _recalls(n: int) -> list[Recall]:
    return [Recall(country=("JP", "US", "DE")[i % 3], recall_number=f"N{i:04d}",
                   recall_date=(dt.date(2021, 1, 1) + dt.timedelta(days=i * 11)) if i % 7 else "not a date",
                   summary_original=f"brake defect {i}", manufacturer_original=("Ford", "トヨタ")[i % 2],
                   model_year=("2019-2021", "2020", None)[i % 3]) for i in range(120)]


@pytest.fixture
def filled(store):
    return stored_by_a_finished_run(store, _recalls(120))


def _rows(conn, sql):
    return sorted((tuple(r) for r in conn.execute(sql).fetchall()), key=repr)


def test_kept_counts_equal_the_facet_queries_over_the_table(filled):
    conn = filled.db.conn
    facetcounts.store_whole_table_counts(filled)
    kept = json.loads(filled.get_meta(facetcounts.META_PREFIX + "recalls"))
    assert kept["marker"] == facetcounts.data_marker(conn, "recalls")
    rows = kept["rows"]
    for facet in VEHICLE_RECALL.facets:
        sql = facetcounts.values_sql(facet.field, facet.multi, "SELECT * FROM [recalls]")
        assert sorted(((r["value"], r["count"]) for r in rows[sql]), key=repr) == _rows(conn, sql)
    # The known months (all months less the undated records') equal the straight query's.
    source = facetcounts.whole_table("recalls")
    known = facetcounts.known_months(rows[facetcounts.months_sql("recall_date", source, known_only=False)],
                                     rows[facetcounts.months_sql("recall_date", source, known_only=False,
                                                                 undated_only=True)])
    straight = _rows(conn, facetcounts.months_sql("recall_date", source, known_only=True))
    assert sorted(((r["value"], r["count"]) for r in known), key=repr) == straight and straight
    assert rows[facetcounts.unknown_sql(source)][0]["n"] == conn.execute(
        "SELECT count(*) FROM recalls WHERE date_unknown = 1").fetchone()[0] > 0


def test_counts_of_older_data_are_not_read(filled):
    conn = filled.db.conn
    facetcounts.store_whole_table_counts(filled)
    marker = facetcounts.data_marker(conn, "recalls")
    assert facetcounts.stored_counts(conn, "recalls", marker) is not None
    filled.upsert("vehicle_recall", [Recall(country="US", recall_number="LATE", recall_date="2024-05-01",
                                  summary_original="late")], source="test")
    now = facetcounts.data_marker(conn, "recalls")
    assert now != marker and facetcounts.stored_counts(conn, "recalls", now) is None


def _page(db_path, path):
    from datasette.app import Datasette

    from basecrawler.reading.browse import WEB_DIR, build_metadata

    async def fetch():
        ds = Datasette([db_path], metadata=build_metadata(db_path), plugins_dir=str(WEB_DIR / "plugins"))
        await ds.invoke_startup()
        name = next(n for n in ds.databases if n != "_internal")
        return (await ds.client.get(f"/{name}{path}")).json()
    return asyncio.run(fetch())


def _facet_counts(data, column):
    return {v["value"]: v["count"] for v in data["facet_results"][column]["results"]}


def test_the_table_page_shows_the_counts_the_run_kept(filled, db_path):
    facetcounts.store_whole_table_counts(filled)
    key = facetcounts.META_PREFIX + "recalls"
    kept = json.loads(filled.get_meta(key))
    sql = facetcounts.values_sql("country", False, "SELECT * FROM [recalls]")
    counted = {r["value"]: r["count"] for r in kept["rows"][sql]}
    # Marked so the page can only have shown them by reading them from meta.
    kept["rows"][sql] = [{"value": "ZZ", "count": 99}]
    filled.set_meta(key, json.dumps(kept))
    assert _facet_counts(_page(db_path, "/recalls.json?_size=0"), "country") == {"ZZ": 99}
    # Kept for older data (a record added since): the page counts for itself.
    filled.upsert("vehicle_recall", [Recall(country="US", recall_number="LATE", recall_date="2024-05-01",
                                  summary_original="late")], source="test")
    counted["US"] += 1
    assert _facet_counts(_page(db_path, "/recalls.json?_size=0"), "country") == counted


def test_the_month_facet_of_the_whole_table_counts_known_dates_only(filled, db_path):
    data = _page(db_path, "/recalls.json?_size=0&_facet_size=max")
    months = _facet_counts(data, "recall_date")
    unknown = months.pop("date unknown")
    conn = filled.db.conn
    assert months == dict(conn.execute("SELECT substr(recall_date, 1, 7), count(*) FROM recalls WHERE recall_date > "
                                       "'1970-01-01' AND COALESCE(date_unknown, 0) = 0 GROUP BY 1").fetchall())
    assert unknown == conn.execute("SELECT count(*) FROM recalls WHERE date_unknown = 1").fetchone()[0]


def test_a_summary_still_counting_is_awaited_once_not_once_per_asker(filled, db_path, monkeypatch):
    """The first asker waits its wait; an asker after that deadline (the page's next facet)
    does not wait again while the count goes on."""
    from datasette.app import Datasette

    import basecrawler.reading.summary as summary_module

    release = hold_summaries(monkeypatch, summary_module)

    async def scenario():
        ds = Datasette([db_path])
        await ds.invoke_startup()
        name = next(n for n in ds.databases if n != "_internal")
        filters = RecallFilter(text="defect")   # a search no other test summarises (kept per name)
        first = await summary_cache.cached_summary(ds, name, "recalls", filters, wait_s=0.2)
        started = time.monotonic()
        second = await summary_cache.cached_summary(ds, name, "recalls", filters, wait_s=20)
        waited = time.monotonic() - started
        release.set()
        done = None
        for _ in range(300):   # the count goes on and a later visit finds it
            done = await summary_cache.cached_summary(ds, name, "recalls", filters, wait_s=20)
            if done is not None:
                break
            await asyncio.sleep(0.1)
        return first, second, waited, done

    first, second, waited, done = asyncio.run(scenario())
    assert first is None and second is None and waited < 5
    assert done is not None and done.count == 120


def test_a_term_in_every_record_is_summarised_from_the_kept_counts(filled, monkeypatch):
    """A search whose term every record holds counts the whole table: from the counts the run
    kept, equal to counting it."""
    import basecrawler.reading.summary as summary_module

    conn = filled.db.conn
    monkeypatch.setattr(summary_module, "IDS_MAX", 10)
    counted = summary_module.summarise(conn, RecallFilter(text="brake"))
    facetcounts.store_whole_table_counts(filled)
    kept = summary_module.summarise(conn, RecallFilter(text="brake"))
    assert kept == counted and kept.count == 120 and kept.ids is None
    # Marked: the kept counts are what it read.
    key = facetcounts.META_PREFIX + "recalls"
    stored = json.loads(filled.get_meta(key))
    sql = facetcounts.values_sql("country", False, "SELECT * FROM [recalls]")
    stored["rows"][sql] = [{"value": "ZZ", "count": 120}]
    filled.set_meta(key, json.dumps(stored))
    assert summary_module.summarise(conn, RecallFilter(text="brake")).values["country"] == {"ZZ": 120}


def _mostly_pumps(n: int) -> list[Recall]:
    """`pump` (any case) in three records of four, with unknown dates and missing model years."""
    return [Recall(country=("JP", "US", "DE", "KR")[i % 4], recall_number=f"P{i:04d}",
                   recall_date=(dt.date(2020, 1, 1) + dt.timedelta(days=i * 5)) if i % 9 else "not a date",
                   summary_original=("brake hose", "fuel PUMP leaks", "Pumpe ärger", "pump")[i % 4] + f" {i}",
                   manufacturer_original=("Ford", "トヨタ", "Kia")[i % 3],
                   model_year=("2019-2021", "2020", None)[i % 3]) for i in range(n)]


@pytest.mark.parametrize("text", ["pump", "PUMP", "umpe", "hose", "fuel", "brake"])
def test_a_term_in_most_records_is_the_whole_tables_counts_less_the_rest(store, monkeypatch, text):
    """A term in more than half of a large table is summarised as the kept whole-table counts
    less the records without it: the same summary as counting the records with it."""
    import basecrawler.reading.summary as summary_module
    from basecrawler.reading.search import build_query, short_index, short_terms

    run = store.runs.start_run("test", "incremental", "running", 1)
    store.upsert("vehicle_recall", _mostly_pumps(200), source="test")
    store.runs.update_run(run, status="succeeded", finished_at="2024-01-02T00:00:00+00:00")
    facetcounts.store_whole_table_counts(store)
    monkeypatch.setattr(summary_module, "IDS_MAX", 10)
    conn = store.db.conn
    filters = RecallFilter(text=text)
    record_type = filters.declaration()
    grams = short_index(conn, record_type)
    sql, params = build_query(filters, columns=summary_module._selected(record_type), ordered=False,
                              walk=short_terms(filters, grams), grams=grams)
    counted = summary_module._counted(conn, record_type, sql, params, keep_ids=False)
    subtracted = []
    real_less = summary_module._less
    monkeypatch.setattr(summary_module, "_less", lambda whole, rest: subtracted.append(rest) or real_less(whole, rest))
    summary = summary_module.summarise(conn, filters)
    assert summary == counted and summary.months and summary.values["country"]
    # The other way round only for a term in more than half of the records (pump: 150 of 200).
    assert bool(subtracted) == (2 * counted.count > 200 and counted.count < 200)


def test_a_search_page_waits_for_its_counts_once_and_says_when_they_follow(filled, db_path, monkeypatch):
    """Every search page waits summary_cache.SUMMARY_WAIT_S for its summary (a term in many records too:
    counted in parts from the facet index, most fit); one still counting then says that its
    counts and facets follow (the page's script fills them in, tests/test_web_counts_follow.py)."""
    from datasette.app import Datasette

    import basecrawler.reading.summary as summary_module
    from basecrawler.reading.browse import WEB_DIR, build_metadata

    monkeypatch.setattr("basecrawler.reading.search.WALK_MIN", 10)
    monkeypatch.setattr(summary_cache, "_summaries", {})   # no summary from another test
    release = hold_summaries(monkeypatch, summary_module)
    waits = {}

    async def scenario():
        ds = Datasette([db_path], metadata=build_metadata(db_path), plugins_dir=str(WEB_DIR / "plugins"))
        from datasette.plugins import pm
        plugin = next(p for p in pm.get_plugins() if hasattr(p, "RARE_SHORT_WAIT_S"))
        real_cached = plugin.cached_summary

        async def spy(datasette, database, table, filters, wait_s, **kwargs):
            waits[filters.text] = wait_s
            return await real_cached(datasette, database, table, filters, wait_s, **kwargs)
        monkeypatch.setattr(plugin, "cached_summary", spy)
        await ds.invoke_startup()
        name = next(n for n in ds.databases if n != "_internal")
        pages = {}
        for term in ("brake", "defect 7"):
            response = await ds.client.get(f"/{name}/recalls?_search={term}&_nocount=1&_col=recall_number")
            assert response.status_code == 200
            pages[term] = response.text
            release.set()   # held while the first page was made
        return summary_cache.SUMMARY_WAIT_S, pages
    wait, pages = asyncio.run(scenario())
    assert waits == {"brake": wait, "defect 7": wait}
    follow = "건수와 분류는 몇 초 뒤 표시됩니다"    # "the counts and facets follow …", the Korean default
    assert follow in pages["brake"] and "These facets timed out" in pages["brake"]
    assert follow not in pages["defect 7"] and "These facets timed out" not in pages["defect 7"]
