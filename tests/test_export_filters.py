"""`--filter FIELD=VALUE` compares the column with the stored values equal to VALUE ignoring
case (so the column's index can answer it, #23.5): the rows are exactly those of the
case-insensitive test on every row it replaced, whatever case the values were stored in."""
import datetime as dt

import pytest

from basecrawler import Recall, Store
from basecrawler.reading.search import RecallFilter, build_query, iter_recalls
from pgcluster import pg_cluster, pg_url  # noqa: F401  (fixtures)
from basecrawler.store.engines.dialect import dialect_of

STORED = ["JP", "jp", "Jp", "US", "ÄÖ", "äö", None, "J", "JPN", "j%"]
ASKED = ["JP", "jp", "jP", "us", "ÄÖ", "äö", "Äö", "j", "JPN", "j%", "j_", "", "XX"]


def _fill(store: Store) -> None:
    store.upsert("vehicle_recall", [Recall(country="JP", recall_number=f"N{i:03d}",
                                 recall_date=dt.date(2024, 1, 1) + dt.timedelta(days=i),
                                 summary_original=f"text {i}", manufacturer_original=("Ford", "トヨタ", "BMW")[i % 3])
                          for i in range(60)], source="test")
    # Stored values in every case (another writer, an older store): the filter must find them all.
    conn = store.db.conn
    d = dialect_of(conn)
    for i, value in enumerate(STORED):
        conn.execute(d.write(f"UPDATE recalls SET country = {d.p}, source = {d.p} WHERE recall_number {d.ilike} {d.p}"),
                     [value, ("test", "TEST", "Test")[i % 3], f"N0{i}%"])
    getattr(conn, "commit", lambda: None)()   # PostgreSQL: the adapter commits each statement


def _ids(conn, dialect, field, value, facet_sets=False):
    sql, params = build_query(RecallFilter(facets=((field, value),)), columns="r.id", dialect=dialect,
                              facet_sets=facet_sets)
    return [row[0] for row in conn.execute(sql, params)]


def _reference(conn, field, value):
    """The test every row used to get: LOWER of the stored value against LOWER of the value."""
    d = dialect_of(conn)
    return [row[0] for row in conn.execute(
        d.query(f"SELECT r.id FROM recalls AS r WHERE LOWER(CAST(r.{field} AS TEXT)) = LOWER({d.p}) "
        "ORDER BY r.recall_date DESC, r.id DESC"), [value])]


@pytest.mark.parametrize("value", ASKED)
@pytest.mark.parametrize("field", ["country", "source"])
def test_a_facet_filter_selects_the_rows_of_the_case_insensitive_test(store, field, value):
    _fill(store)
    conn = store.db.conn
    assert _ids(conn, "sqlite", field, value) == _reference(conn, field, value)
    assert _ids(conn, "sqlite", field, value, facet_sets=True) == _reference(conn, field, value)   # as an export reads


def test_a_normalised_facet_finds_every_spelling_through_its_stored_key(store):
    _fill(store)
    conn = store.db.conn
    for spelling in ("toyota", "トヨタ", "TOYOTA"):
        found = _ids(conn, "sqlite", "manufacturer_key", spelling)
        assert len(found) == 20 and found == _ids(conn, "sqlite", "manufacturer_key", "トヨタ")


def test_a_rare_value_is_read_through_the_columns_index(store):
    _fill(store)
    conn = store.db.conn
    sql, params = build_query(RecallFilter(facets=(("country", "us"),)), columns="r.id", ordered=False)
    plan = " ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params))
    assert "idx_recalls_country" in plan and "SCAN r " not in plan + " "


def _exported(conn, field, value):
    names, rows = iter_recalls(conn, RecallFilter(facets=((field, value),)))
    return [row[names.index("id")] for row in rows]


def test_an_export_reads_the_rows_of_the_case_insensitive_test(store, monkeypatch):
    """A rare value's ids come from the column's index (threshold lowered so one is rare here),
    a common one walks the newest-first index: the same rows in the same order either way."""
    from basecrawler.reading import search as search_module

    _fill(store)
    conn = store.db.conn
    monkeypatch.setattr(search_module, "WALK_MIN", 11)   # 10 of the 60 records are US
    assert search_module._a_rare_facet_value(conn, RecallFilter(facets=(("country", "us"),)))
    assert not search_module._a_rare_facet_value(conn, RecallFilter(facets=(("source", "test"),)))
    for field, value in [("country", "us"), ("country", "jp"), ("source", "test"), ("country", "XX")]:
        assert _exported(conn, field, value) == _reference(conn, field, value)


def test_the_same_rows_on_postgresql(pg_url):  # noqa: F811
    store = Store(pg_url)
    try:
        _fill(store)
        conn = store.db.conn
        for field, value in [("country", "us"), ("source", "test"), ("country", "XX")]:
            assert _exported(conn, field, value) == _reference(conn, field, value)
        for field in ("country", "source"):
            for value in ASKED:
                assert _ids(conn, "postgresql", field, value) == _reference(conn, field, value), (field, value)
                assert _ids(conn, "postgresql", field, value, True) == _reference(conn, field, value), (field, value)
    finally:
        store.close()
