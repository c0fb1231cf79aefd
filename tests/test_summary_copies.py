"""A search summary (reading/summary.py) counts what the page lists: on a store with groups of
publishers it leaves other publishers' copies out, as the page's rows do, unless every copy is
asked for — so the web view can take a grouped search page's count and facets from it (a
summary counting every copy made Datasette count the page itself, seconds at a million)."""
import pytest

from basecrawler.reading import facetcounts
from basecrawler.reading import summary as summary_module
from basecrawler.reading.search import RecallFilter, build_query
from basecrawler.recordtypes import get_record_type
from test_groups_plans import grouped_many

ALERTS = get_record_type("product_alert")
SINGLE = [f.field for f in ALERTS.facets if not f.multi]


def _listed(conn, filters: RecallFilter, hide: bool) -> dict:
    """What the page's own query selects: its ids and each single-valued facet's counts."""
    sql, params = build_query(filters, ordered=False, hide_copies=hide)
    ids = sorted(row[0] for row in conn.execute(f"SELECT id FROM ({sql})", params))
    values = {c: dict(conn.execute(f"SELECT [{c}], count(*) FROM ({sql}) GROUP BY 1", params).fetchall())
              for c in SINGLE}
    return {"ids": ids, "values": {c: v for c, v in values.items() if v}}


@pytest.mark.parametrize("kept", [False, True])
@pytest.mark.parametrize("parts", [1, 2])
@pytest.mark.parametrize("all_copies", [False, True])
@pytest.mark.parametrize("text", ["Peanut", "Salmonella", "butter lot", "OECD", "QX", "oil", "nowhere"])
def test_a_summary_leaves_out_the_copies_the_page_leaves_out(db_path, store, monkeypatch, text, parts, all_copies, kept):
    grouped_many(db_path)
    if kept:   # the whole table's counts a run kept: a term in most records is counted the other way round
        facetcounts.store_whole_table_counts(store)
        monkeypatch.setattr(summary_module, "IDS_MAX", 5)
    monkeypatch.setattr(summary_module, "SPLIT_ROWS", 0)   # in parts however few the records
    conn = store.db.conn
    filters = RecallFilter(text=text, record_type=ALERTS.name, all_copies=all_copies)
    summary = summary_module.summarise(conn, filters, parts=parts)
    listed = _listed(conn, filters, hide=not all_copies)
    assert summary.count == len(listed["ids"])
    assert {c: v for c, v in summary.values.items() if v and c in SINGLE} == listed["values"]
    if summary.ids is not None:
        assert sorted(summary.ids) == listed["ids"]


def test_the_copies_change_the_count(db_path, store):
    """(The store above has copies a search finds: without leaving them out the counts differ.)"""
    grouped_many(db_path)
    conn = store.db.conn
    shown = summary_module.summarise(conn, RecallFilter(text="Peanut", record_type=ALERTS.name))
    every = summary_module.summarise(conn, RecallFilter(text="Peanut", record_type=ALERTS.name, all_copies=True))
    assert (shown.count, every.count) == (35, 47)   # 30 originals + 5 German; + the 12 Canadian copies
