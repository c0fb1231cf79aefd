"""The copy flag (store/groups.py): readers hide another publisher's copy by a column of the
record (`is_copy`), which relinking keeps with the group table in the same transaction, and
which indexes hold beside the columns a count walks — so a count with groups reads an index
alone, as one without groups does (bench/bench_groups.py). Stores grouped before the flag get it
from `groups_migration.copy_flags`, on both engines."""
import pytest

from basecrawler.reading.search import RecallFilter, build_query, count, count_upto, search
from basecrawler.recordtypes import get_record_type
from basecrawler import Store
from basecrawler.store import groups
from basecrawler.store.groups_migration import copy_flags

from pgcluster import pg_cluster, pg_url  # noqa: F401  (fixtures)
from test_groups import Original, Republisher, crawl, ids_of
from basecrawler.store.engines.dialect import dialect_of

ALERTS = get_record_type("product_alert")


def flags(store) -> dict:
    return {(r["source"], r["alert_id"]): r["is_copy"]
            for r in store.query(dialect_of(store).query('SELECT source, alert_id, "is_copy" FROM product_alerts'))}


def grouped(db_path):
    crawl(Original, db_path, [{"nid": "82438", "title": "Peanut butter recalled"}, {"nid": "90001", "title": "Kettle"}])
    crawl(Republisher, db_path, [{"country": "CA", "nid": "82438", "title": "Peanut butter (OECD)"},
                                 {"country": "CA", "nid": "90001", "title": "Kettle (OECD)"},
                                 {"country": "DE", "nid": "82438", "title": "A German alert"}])


def test_relinking_flags_each_copy_and_clears_a_record_that_left_its_group(db_path, store):
    grouped(db_path)
    assert flags(store) == {("origdemo", "82438"): None, ("origdemo", "90001"): None,
                            ("repubdemo", "EN/CA/82438"): 1, ("repubdemo", "EN/CA/90001"): 1,
                            ("repubdemo", "EN/DE/82438"): None}
    store.write(lambda db: db.conn.execute("DELETE FROM product_alerts WHERE source = 'origdemo' AND alert_id = '90001'"))
    crawl(Republisher, db_path, [{"country": "CA", "nid": "90001", "title": "Kettle (OECD)"}])
    assert flags(store)[("repubdemo", "EN/CA/90001")] is None   # its original is gone: shown again
    assert flags(store)[("repubdemo", "EN/CA/82438")] == 1
    assert ids_of(search(store.db.conn, RecallFilter(record_type="product_alert"))) == [
        ("origdemo", "82438"), ("repubdemo", "EN/CA/90001"), ("repubdemo", "EN/DE/82438")]


@pytest.mark.parametrize("filters", [RecallFilter(record_type="product_alert"),
                                     RecallFilter(record_type="product_alert", countries=("CA",)),
                                     RecallFilter(record_type="product_alert", source="repubdemo"),
                                     RecallFilter(record_type="product_alert", facets=(("status", "ongoing"),))],
                         ids=["everything", "a country", "a source", "a facet"])
def test_a_count_with_groups_reads_one_index_and_never_the_group_table(db_path, store, filters):
    grouped(db_path)
    conn = store.db.conn
    conn.execute("ANALYZE")
    sql, params = build_query(filters, columns="1", ordered=False, driven=True, hide_copies=True)
    plan = " ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
    assert "COVERING INDEX" in plan and groups.TABLE not in plan, plan
    assert count_upto(conn, filters) == count(conn, filters)


def test_a_store_grouped_before_the_flag_gets_it_from_the_migration(db_path, store):
    grouped(db_path)
    store.close()
    conn = Store(db_path).db.conn   # as an older version left it: links, no flag column
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql LIKE '%is_copy%'").fetchall():
        conn.execute(f"DROP INDEX [{name}]")
    conn.execute("ALTER TABLE product_alerts DROP COLUMN is_copy")
    assert copy_flags(conn) == 2
    assert [r[0] for r in conn.execute("SELECT alert_id FROM product_alerts WHERE is_copy = 1 ORDER BY 1")] == [
        "EN/CA/82438", "EN/CA/90001"]
    assert ids_of(search(conn, RecallFilter(record_type="product_alert"))) == [
        ("origdemo", "82438"), ("origdemo", "90001"), ("repubdemo", "EN/DE/82438")]
    assert copy_flags(conn) == 2   # again: nothing changes


def test_postgresql_hides_copies_by_the_flag_too(pg_url):  # noqa: F811
    grouped(pg_url)
    store = Store(pg_url)
    try:
        conn = store.db.conn
        assert flags(store)[("repubdemo", "EN/CA/82438")] == 1
        alerts = RecallFilter(record_type="product_alert")
        assert ids_of(search(conn, alerts)) == [("origdemo", "82438"), ("origdemo", "90001"), ("repubdemo", "EN/DE/82438")]
        assert count_upto(conn, alerts) == count(conn, alerts) == 3
        assert count_upto(conn, RecallFilter(record_type="product_alert", all_copies=True)) == 5
        assert ids_of(search(conn, RecallFilter(record_type="product_alert", text="OECD"))) == []
        store.write(lambda db: db.execute(dialect_of(db).write('UPDATE product_alerts SET "is_copy" = NULL')))   # as before the flag
        assert copy_flags(conn) == 2
        assert count(conn, alerts) == 3
    finally:
        store.close()


def test_showing_every_copy_plans_a_common_term_as_the_grouped_search_does(db_path, store, monkeypatch):
    """`--all-copies` only leaves the flag test out: a term in many records is still read walking
    the newest-first index (not collected and sorted, seconds at a million records)."""
    from basecrawler.reading import search as search_module

    grouped(db_path)
    monkeypatch.setattr(search_module, "WALK_MIN", 1)
    conn = store.db.conn
    assert search_module.plan_terms(conn, RecallFilter(record_type="product_alert", text="Peanut")) == {"Peanut"}
    assert search_module.plan_terms(conn, RecallFilter(record_type="product_alert", text="Peanut",
                                                       all_copies=True)) == {"Peanut"}
    assert search_module.plan_terms(conn, RecallFilter(record_type="product_alert", text="Peanut",
                                                       countries=("CA",))) == frozenset()
