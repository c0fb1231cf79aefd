"""A search summary counted in parts of the id range (the web view counts them at once on
two connections) and read from the type's narrow facet index gives the same counts as one
pass over the wide rows; an existing store gets the facet index when opened, and one without
it is still summarised."""
import asyncio

import pytest

from basecrawler import Store
from basecrawler.reading import facetcounts
from basecrawler.reading import summary as summary_module
from basecrawler.reading.search import RecallFilter, build_query
from basecrawler.recordtypes import get_record_type
from basecrawler.recordtypes.tables import facet_index_columns, index_name
from test_read_first_visit import _mostly_pumps
from test_read_scale import _recalls

VEHICLE = get_record_type("vehicle_recall")
FACET_INDEX = index_name(VEHICLE, facet_index_columns(VEHICLE))


@pytest.fixture
def filled(store):
    store.upsert("vehicle_recall", _recalls(800), source="test")
    return store


def _plain(conn, filters) -> dict:
    """What the facet queries count over the rows `build_query` selects."""
    sql, params = build_query(filters, ordered=False)
    values = {c: dict(conn.execute(f"SELECT [{c}], count(*) FROM ({sql}) GROUP BY 1", params).fetchall())
              for c in ("country", "source", "manufacturer_key", "model_year")}
    months = dict(conn.execute(f"SELECT substr(recall_date, 1, 7), count(*) FROM ({sql}) WHERE recall_date > "
                               "'1970-01-01' AND COALESCE(date_unknown, 0) = 0 GROUP BY 1", params).fetchall())
    ids = sorted(row[0] for row in conn.execute(f"SELECT id FROM ({sql})", params))
    return {"values": {c: v for c, v in values.items() if v}, "months": months, "ids": ids}


@pytest.mark.parametrize("parts", [1, 2, 3])
@pytest.mark.parametrize("text", ["brake", "BRAKE", "燃料 ポンプ", "brake hose", "axle", "AC le", "燃料", "x",
                                  "ärger", "nowhere at all"])
def test_a_summary_in_parts_counts_what_the_facet_queries_count(filled, monkeypatch, text, parts):
    monkeypatch.setattr(summary_module, "SPLIT_ROWS", 0)   # split however few the records
    conn = filled.db.conn
    filters = RecallFilter(text=text)
    summary = summary_module.summarise(conn, filters, parts=parts)
    plain = _plain(conn, filters)
    assert {c: v for c, v in summary.values.items() if v} == plain["values"]
    assert summary.months == plain["months"] and summary.count == len(plain["ids"])
    assert sorted(summary.ids) == plain["ids"]


def test_a_whole_table_summary_is_counted_once_not_per_part(filled, monkeypatch):
    monkeypatch.setattr(summary_module, "SPLIT_ROWS", 0)
    conn = filled.db.conn
    summary = summary_module.summarise(conn, RecallFilter(), parts=2)
    assert summary.count == 800 and sum(summary.values["country"].values()) == 800


@pytest.mark.parametrize("text", ["pump", "hose", "brake", "fuel"])
def test_the_other_way_round_in_parts_equals_counting_the_matches(store, monkeypatch, text):
    """A term in most records (the kept whole-table counts less the rest), counted in two parts."""
    run = store.runs.start_run("test", "incremental", "running", 1)
    store.upsert("vehicle_recall", _mostly_pumps(200), source="test")
    store.runs.update_run(run, status="succeeded", finished_at="2024-01-02T00:00:00+00:00")
    facetcounts.store_whole_table_counts(store)
    monkeypatch.setattr(summary_module, "IDS_MAX", 10)
    monkeypatch.setattr(summary_module, "SPLIT_ROWS", 0)
    conn = store.db.conn
    filters = RecallFilter(text=text)
    one = summary_module.summarise(conn, filters)
    subtracted = []
    real_less = summary_module._less
    monkeypatch.setattr(summary_module, "_less", lambda whole, rest: subtracted.append(rest) or real_less(whole, rest))
    two = summary_module.summarise(conn, filters, parts=2)
    assert two == one and two.values["country"] and two.date_unknown == one.date_unknown
    assert bool(subtracted) == (text == "pump")   # in 150 of 200: the other way round
    plain = _plain(conn, filters)
    assert two.months == plain["months"] and two.count == len(plain["ids"])


def test_the_summary_reads_the_facet_index_not_the_rows(filled, monkeypatch):
    conn = filled.db.conn
    read = []
    real = summary_module._counted

    def spy(conn, record_type, sql, params, keep_ids=True):
        read.append(" ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)))
        return real(conn, record_type, sql, params, keep_ids)
    monkeypatch.setattr(summary_module, "_counted", spy)
    summary_module.summarise(conn, RecallFilter(text="brake hose"))
    assert read and all(f"COVERING INDEX {FACET_INDEX}" in plan for plan in read), read


def test_an_existing_store_gets_the_facet_index_and_one_without_it_is_still_summarised(filled, db_path):
    conn = filled.db.conn
    with_index = summary_module.summarise(conn, RecallFilter(text="brake"))
    conn.execute(f"DROP INDEX [{FACET_INDEX}]")
    without = summary_module.summarise(conn, RecallFilter(text="brake"))
    assert without == with_index and without.count > 0
    filled.close()
    reopened = Store(db_path)
    names = {row["name"] for row in reopened.query("PRAGMA index_list(recalls)")}
    assert FACET_INDEX in names
    reopened.close()


def test_the_web_view_counts_the_parts_on_connections_of_its_own(filled, db_path, monkeypatch):
    """summarise_in: the parts through Datasette's thread pool (at once), the same summary."""
    from datasette.app import Datasette

    monkeypatch.setattr(summary_module, "SPLIT_ROWS", 0)
    parts = []
    real = summary_module._count_matching

    def spy(conn, **kwargs):
        parts.append(kwargs["span"])
        return real(conn, **kwargs)
    monkeypatch.setattr(summary_module, "_count_matching", spy)

    async def scenario():
        ds = Datasette([db_path])
        name = next(n for n in ds.databases if n != "_internal")
        return await summary_module.summarise_in(ds.get_database(name), RecallFilter(text="brake"), parts=2)
    summary = asyncio.run(scenario())
    monkeypatch.setattr(summary_module, "_count_matching", real)
    assert summary == summary_module.summarise(filled.db.conn, RecallFilter(text="brake"))
    assert len(parts) == 2 and None not in parts and summary.count > 0
