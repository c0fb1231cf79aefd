"""How a grouped store is read (store/groups.py `copy_indexes`, reading/search_query.py): the
flag's indexes hold the shown records alone, so a count or a page that walks one has no copy
test and reads no copy (bench/bench_groups.py: the grouping's cost to a search) — and whichever
way a query reads, it finds exactly the records that are no copy, on both engines."""
import pytest

from basecrawler import Store
from basecrawler.reading import search as search_module
from basecrawler.reading.search import RecallFilter, build_query, count, count_upto, search
from basecrawler.recordtypes import get_record_type
from basecrawler.store import groups

from pgcluster import pg_cluster, pg_url  # noqa: F401  (fixtures)
from test_groups import Original, Republisher, crawl
from basecrawler.store.engines.dialect import dialect_of

ALERTS = get_record_type("product_alert")


def grouped_many(db_path):
    """30 original alerts, 12 of them republished (Canadian: copies), and 5 German ones (no copies)."""
    crawl(Original, db_path, [{"nid": str(1000 + n), "title": f"Peanut butter lot {n}", "text": "Salmonella QX"}
                              for n in range(30)])
    crawl(Republisher, db_path, [*({"country": "CA", "nid": str(1000 + n), "title": f"Peanut butter lot {n} (OECD)"}
                                   for n in range(0, 24, 2)),
                                 *({"country": "DE", "nid": str(5000 + n), "title": f"Peanut oil {n}"} for n in range(5))])


def plan(conn, sql, params) -> str:
    conn.execute(sql, params).fetchall()   # (runs it first: EXPLAIN alone never notices another connection's new index)
    return " | ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))


def shown_index(*columns) -> str:
    return next(i.name for i in groups.copy_indexes(ALERTS) if i.columns == columns)


@pytest.mark.parametrize("filters, columns", [
    (RecallFilter(record_type="product_alert"), ("id", groups.FLAG)),
    (RecallFilter(record_type="product_alert", countries=("CA",)), ("country", "id", groups.FLAG)),
    (RecallFilter(record_type="product_alert", source="repubdemo"), ("source", "id", groups.FLAG)),
    (RecallFilter(record_type="product_alert", facets=(("status", "ongoing"),)), ("status", "id", groups.FLAG)),
], ids=["everything", "a country", "a source", "a facet"])
def test_a_count_reads_the_shown_records_index_alone(db_path, store, filters, columns):
    grouped_many(db_path)
    sql, params = build_query(filters, columns="1", ordered=False, driven=True, hide_copies=True)
    found = plan(store.db.conn, sql, params)
    # Covering, and the flag no constraint: the index's WHERE is the test, nothing is compared per entry.
    assert f"COVERING INDEX {shown_index(*columns)}" in found and "is_copy=" not in found, found


@pytest.mark.parametrize("filters, walk", [(RecallFilter(record_type="product_alert"), frozenset()),
                                           (RecallFilter(record_type="product_alert", text="Peanut"),
                                            frozenset({"Peanut"}))],
                         ids=["the table", "a term walked"])
def test_a_page_walks_the_newest_shown_records(db_path, store, filters, walk):
    grouped_many(db_path)
    sql, params = build_query(filters, limit=50, walk=walk, hide_copies=True)
    found = plan(store.db.conn, sql, params)
    assert f"INDEX {shown_index(ALERTS.date_field, 'id')}" in found and "TEMP B-TREE" not in found, found


def test_a_term_read_from_its_index_tests_the_flag_on_the_rows_it_reads(db_path, store):
    grouped_many(db_path)
    sql, params = build_query(RecallFilter(record_type="product_alert", text="Peanut"), limit=50, hide_copies=True)
    found = plan(store.db.conn, sql, params)
    assert "_shown_" not in found and groups.TABLE not in found, found


def test_a_count_driven_by_the_full_text_index_looks_each_id_up_in_the_shown_ids(db_path, store):
    """(Where the table has statistics; without, SQLite reads the row and tests its flag there.)"""
    grouped_many(db_path)
    store.db.conn.execute("ANALYZE")
    sql, params = build_query(RecallFilter(record_type="product_alert", text="Peanut"), columns="1", ordered=False,
                              driven=True, hide_copies=True)
    found = plan(store.db.conn, sql, params)
    assert f"COVERING INDEX {shown_index('id', groups.FLAG)}" in found and groups.TABLE not in found, found


FILTERS = [{}, {"countries": ("CA",)}, {"countries": ("DE",)}, {"source": "repubdemo"}, {"source": "origdemo"},
           {"text": "Peanut"}, {"text": "OECD"}, {"text": "lot 1"}, {"text": "QX"}, {"text": "oil"},
           {"text": "Peanut", "countries": ("CA",)}, {"facets": (("status", "ongoing"),)},
           {"text": "1"}, {"text": "10"}, {"text": ")"}, {"text": "1", "countries": ("CA",)}]


def expected(conn, options) -> list[int]:
    every = search(conn, RecallFilter(record_type="product_alert", all_copies=True, **options), limit=1000)
    return sorted(r["id"] for r in every if r["id"] not in copy_ids(conn))


def copy_ids(conn) -> set[int]:
    return {r[0] for r in conn.execute(dialect_of(conn).query(f'SELECT member_id FROM "{groups.TABLE}"')).fetchall()}


@pytest.mark.parametrize("walked", [False, True], ids=["sets", "walks"])
def test_whichever_way_a_query_reads_it_finds_exactly_the_records_that_are_no_copy(db_path, store, monkeypatch,
                                                                                    walked):
    grouped_many(db_path)
    if walked:   # every term tested row by row on the newest-first walk, every short term on storage order
        monkeypatch.setattr(search_module, "WALK_MIN", 1)
        monkeypatch.setattr(search_module, "WALK_SHARE", 0.0)
    conn = store.db.conn
    assert len(copy_ids(conn)) == 12
    for options in FILTERS:
        filters = RecallFilter(record_type="product_alert", **options)
        wanted = expected(conn, options)
        page = search(conn, filters, limit=1000)
        assert sorted(r["id"] for r in page) == wanted, options
        assert [r["id"] for r in search(conn, filters, limit=3, offset=2)] == [r["id"] for r in page][2:5], options
        assert count(conn, filters) == count_upto(conn, filters) == len(wanted), options
        assert count_upto(conn, filters, cap=2) == min(3, len(wanted)), options


def test_relinking_replaces_the_flag_indexes_of_an_older_version(db_path, store):
    grouped_many(db_path)
    conn = store.db.conn
    old = ["idx_product_alerts_is_copy", "idx_product_alerts_country_is_copy"]
    conn.execute(f'CREATE INDEX "{old[0]}" ON product_alerts ("is_copy")')
    conn.execute(f'CREATE INDEX "{old[1]}" ON product_alerts ("country", "is_copy")')
    conn.commit()
    store.write(lambda db: groups.flag_copies(db, ALERTS))
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert not names & set(old)
    assert {i.name for i in groups.copy_indexes(ALERTS)} <= names


def test_a_new_index_of_an_analyzed_table_gets_its_statistics(db_path, store):
    grouped_many(db_path)
    conn = store.db.conn
    conn.execute("ANALYZE")
    name = shown_index("country", "id", groups.FLAG)
    conn.execute(f'DROP INDEX "{name}"')
    conn.execute("DELETE FROM sqlite_stat1 WHERE idx = ?", [name])
    conn.commit()
    assert store.write(lambda db: groups.ensure_copy_indexes(db, ALERTS)) == [name]
    shown = conn.execute('SELECT count(*) FROM product_alerts WHERE "is_copy" IS NULL').fetchone()[0]
    assert conn.execute("SELECT stat FROM sqlite_stat1 WHERE idx = ?", [name]).fetchone()[0].split()[0] == str(shown)


def test_postgresql_makes_the_same_indexes_and_finds_the_same_records(pg_url):  # noqa: F811
    grouped_many(pg_url)
    store = Store(pg_url)
    try:
        conn = store.db.conn
        made = {r["indexname"] for r in store.query(dialect_of(store).query("SELECT indexname FROM pg_indexes WHERE tablename = 'product_alerts'"))}
        assert {i.name for i in groups.copy_indexes(ALERTS)} <= made
        assert len(copy_ids(conn)) == 12
        for options in FILTERS:
            filters = RecallFilter(record_type="product_alert", **options)
            wanted = expected(conn, options)
            assert sorted(r["id"] for r in search(conn, filters, limit=1000)) == wanted, options
            assert count(conn, filters) == count_upto(conn, filters) == len(wanted), options
    finally:
        store.close()
