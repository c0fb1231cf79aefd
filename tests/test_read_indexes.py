"""The reading side is served by indexes derived from each type's declaration (#23.5): the
default sort (newest first) and every single-valued facet, on both engines."""
from basecrawler import Store
from basecrawler.recordtypes import get_record_type
from basecrawler.recordtypes.tables import facet_filter_index, index_name, read_indexes, superseded_indexes
from basecrawler.store.schema import reference_schema


def plan(store, sql):
    return " ".join(row["detail"] for row in store.query(f"EXPLAIN QUERY PLAN {sql}"))


def test_facet_counts_and_the_default_sort_read_an_index_not_the_table(tmp_path):
    store = Store(str(tmp_path / "x.db"))
    vehicle = get_record_type("vehicle_recall")
    for facet in vehicle.facets:
        if not facet.multi:
            detail = plan(store, f"SELECT {facet.field}, COUNT(*) FROM {vehicle.table} GROUP BY {facet.field}")
            # A covering-index scan reads the small index, never the wide rows.
            name = index_name(vehicle, facet_filter_index(vehicle, facet.field))
            assert f"USING COVERING INDEX {name} " in detail + " ", (facet.field, detail)
    detail = plan(store, f"SELECT id FROM {vehicle.table} ORDER BY {vehicle.date_field} DESC LIMIT 50")
    assert "USE TEMP B-TREE" not in detail and "INDEX" in detail, detail


def test_postgresql_gets_the_same_read_indexes_through_the_reference_schema():
    vehicle = get_record_type("vehicle_recall")
    indexes = {name for name, _, _ in reference_schema()[vehicle.table]["indexes"]}
    assert {index_name(vehicle, columns) for columns in read_indexes(vehicle)} <= indexes


def test_an_existing_store_without_them_gets_them_on_open(tmp_path):
    db = str(tmp_path / "old.db")
    Store(db).close()
    store = Store(db)
    store.db.conn.execute("DROP INDEX idx_recalls_country_recall_date")
    store.close()
    reopened = Store(db)
    names = {row["name"] for row in reopened.query("PRAGMA index_list(recalls)")}
    assert "idx_recalls_country_recall_date" in names


def test_a_page_filtered_to_one_value_reads_its_newest_records_in_index_order(tmp_path):
    """A filtered page (`?manufacturer_key=HONDA`: one value, newest first, fifty rows) reads
    its rows in order from the facet's index; led by the facet alone it sorted every record of
    the value (0.17 s for a seventh of a million)."""
    store = Store(str(tmp_path / "x.db"))
    for rt in (get_record_type("vehicle_recall"), get_record_type("product_alert")):
        for facet in rt.facets:
            if facet.multi or facet.field == "source":
                continue
            detail = plan(store, f"SELECT * FROM {rt.table} WHERE [{facet.field}] = 'X' "
                                 f"ORDER BY {rt.date_field} DESC LIMIT 51")
            assert "TEMP B-TREE" not in detail, (rt.name, facet.field, detail)
            assert index_name(rt, facet_filter_index(rt, facet.field)) in detail, (rt.name, facet.field, detail)


def test_an_older_stores_facet_only_indexes_are_replaced_on_open(tmp_path):
    """A store made before the facet indexes carried the date has `idx_recalls_country` etc.:
    opening it makes the new ones and drops those (each costs every write, and the planner
    chose it and sorted)."""
    db = str(tmp_path / "old.db")
    vehicle = get_record_type("vehicle_recall")
    store = Store(db)
    old = superseded_indexes(vehicle)
    assert "idx_recalls_country" in old and "idx_recalls_manufacturer_key" in old
    for name in old:
        store.db.conn.execute(f"CREATE INDEX [{name}] ON recalls ([{name.removeprefix('idx_recalls_')}])")
    store.db.conn.commit()
    store.close()
    names = {row["name"] for row in Store(db).query("PRAGMA index_list(recalls)")}
    assert not names & set(old), names & set(old)
    assert index_name(vehicle, facet_filter_index(vehicle, "country")) in names


def test_a_long_index_name_is_cut_to_what_postgresql_keeps():
    """PostgreSQL cuts identifiers at 63 bytes: an index named longer would be made again (and
    the schema set up again) on every open. The facet index's columns make such a name."""
    from basecrawler.recordtypes.tables import facet_index_columns

    vehicle = get_record_type("vehicle_recall")
    long_name = index_name(vehicle, facet_index_columns(vehicle))
    assert len(long_name.encode()) == 63 and long_name.startswith("idx_recalls_id_country_source")
    assert long_name != index_name(vehicle, (*facet_index_columns(vehicle), "translated_at"))
    assert index_name(vehicle, ("country",)) == "idx_recalls_country"   # short names as sqlite-utils makes them


def test_a_cards_same_number_elsewhere_lookup_seeks_an_index_in_every_type_that_shares_one(tmp_path):
    from basecrawler.recordtypes import record_types

    store = Store(str(tmp_path / "x.db"))
    sharing = [rt for rt in record_types().values() if rt.same_as_field]
    assert {rt.name for rt in sharing} >= {"vehicle_recall", "product_alert"}
    for rt in sharing:
        # The query reading/web/card.py and store/lookup.py `same_as` ask.
        detail = plan(store, f"SELECT id, source FROM {rt.table} WHERE country = 'CA' AND "
                             f"[{rt.same_as_field}] = '2024-123' LIMIT 20")
        assert f"INDEX {index_name(rt, ('country', rt.same_as_field, 'source'))}" in detail, (rt.name, detail)
