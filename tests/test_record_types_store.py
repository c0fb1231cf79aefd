"""The store derives a type's table, key, indexes, search index and upsert from its declaration
(basecrawler/recordtypes): checked with a type declared in the test (`gadget_alert`), on both
engines."""
import datetime as dt

import pytest
from pydantic import BaseModel, ConfigDict, Field

from basecrawler import Store
from basecrawler.recordtypes import RecordType, register_record_type
from basecrawler.recordtypes.registry import forget_registered_types
from pgcluster import any_db, pg_cluster, pg_url  # noqa: F401  (fixtures)
from record_types_support import GADGET, GadgetAlert, gadget, gadget_type  # noqa: F401  (fixture)
from basecrawler.store.engines.dialect import dialect_of


@pytest.fixture
def db_path(any_db):  # noqa: F811
    return any_db


def _columns(store, table):
    cursor = store.db.conn.execute(dialect_of(store.db.conn).query(f"SELECT * FROM {table} WHERE 1 = 0"))
    return [d[0] for d in cursor.description]


def _count_writes(store, table):
    """Every row the database inserts or updates in `table` lands in `writes`."""
    if store.engine == "sqlite":
        store.db.executescript(
            "CREATE TABLE writes (id INTEGER);"
            f"CREATE TRIGGER w_i AFTER INSERT ON {table} BEGIN INSERT INTO writes VALUES (new.id); END;"
            f"CREATE TRIGGER w_u AFTER UPDATE ON {table} BEGIN INSERT INTO writes VALUES (new.id); END;")
    else:
        store.db.executescript(
            "CREATE TABLE writes (id BIGINT);"
            "CREATE FUNCTION note_write() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN INSERT INTO writes VALUES (NEW.id); RETURN NULL; END $$;"
            f"CREATE TRIGGER w AFTER INSERT OR UPDATE ON {table} FOR EACH ROW EXECUTE FUNCTION note_write();")


def test_a_declared_type_gets_its_table_with_a_key_that_starts_with_the_source(gadget_type, db_path):
    store = Store(db_path)
    assert _columns(store, "gadget_alerts") == ["id", *GADGET.column_types]
    assert "date_unknown" in GADGET.data_columns and GADGET.key_columns == ("source", "alert_id")
    store.upsert(GADGET, [gadget(1)], source="hc")
    store.upsert(GADGET, [gadget(1, title_original="Other kettle")], source="cfia")   # same number, other source
    assert store.lookup.count(GADGET) == 2 and store.lookup.count("gadget_alert", source="hc") == 1
    assert store.lookup.get(GADGET, {"source": "hc", "alert_id": "G1"})["title_original"] == "Kettle 1"
    assert store.lookup.get(GADGET, {"source": "cfia", "alert_id": "G1"})["title_original"] == "Other kettle"
    with pytest.raises(Exception):   # the unique key refuses a second (source, alert_id)
        store.write(lambda db: db.conn.execute(
            dialect_of(db.conn).write("INSERT INTO gadget_alerts (source, alert_id, first_seen_at, updated_at) VALUES ('hc', 'G1', 'x', 'x')")))
    store.close()


def test_upsert_counts_are_exact_and_an_unchanged_row_is_not_written(gadget_type, db_path):
    store = Store(db_path)
    _count_writes(store, "gadget_alerts")
    first = store.upsert(GADGET, [gadget(1), gadget(2), gadget(3), gadget(3, authority="CFIA")], source="hc")
    assert (first.new, first.updated, first.unchanged, first.merged) == (3, 0, 0, 1)
    assert store.scalar(dialect_of(store).query("SELECT COUNT(*) FROM writes")) == 3
    again = store.upsert(GADGET, [gadget(1), gadget(2, hazard_original=None, category=[]), gadget(3, authority="CFIA")],
                         source="hc")
    assert (again.new, again.updated, again.unchanged) == (0, 0, 3)   # a blank erases nothing
    assert store.scalar(dialect_of(store).query("SELECT COUNT(*) FROM writes")) == 3
    changed = store.upsert(GADGET, [gadget(1, hazard_original="Fire hazard"), gadget(4)], source="hc")
    assert (changed.new, changed.updated, changed.unchanged) == (1, 1, 0)
    assert store.scalar(dialect_of(store).query("SELECT COUNT(*) FROM writes")) == 5
    assert set(changed.by_key) == {("hc", "G1"), ("hc", "G4")}
    store.close()


def test_a_changed_original_clears_its_translation(gadget_type, db_path):
    store = Store(db_path)
    store.upsert(GADGET, [gadget(1), gadget(2)], source="hc")
    store.write(lambda db: db.conn.execute(
        dialect_of(db.conn).write("UPDATE gadget_alerts SET title_ko = '주전자', hazard_ko = '화상', translated_at = 't', translation_status = 'ok'")))
    store.upsert(GADGET, [gadget(1, title_original="Kettle one"), gadget(2)], source="hc")
    one = store.lookup.get(GADGET, {"source": "hc", "alert_id": "G1"})
    two = store.lookup.get(GADGET, {"source": "hc", "alert_id": "G2"})
    assert (one["title_ko"], one["hazard_ko"], one["translated_at"], one["translation_status"]) == (None, "화상", None, None)
    assert (two["title_ko"], two["translated_at"]) == ("주전자", "t")
    store.close()


def test_a_multi_valued_facet_is_a_json_array_and_rows_come_back_by_key(gadget_type, db_path):
    store = Store(db_path)
    store.upsert(GADGET, [gadget(1, category=["Food", "Allergen"]), gadget(2, category=[])], source="hc")
    assert store.scalar(dialect_of(store).query("SELECT category FROM gadget_alerts WHERE alert_id = 'G1'")) == '["Food", "Allergen"]'
    assert store.scalar(dialect_of(store).query("SELECT category FROM gadget_alerts WHERE alert_id = 'G2'")) is None
    assert store.lookup.get(GADGET, {"source": "hc", "alert_id": "G1"})["category"] == ["Food", "Allergen"]
    found = store.lookup.rows_by_key(GADGET, [("hc", "G1"), ("hc", "G2"), ("hc", "G9"), ("cfia", "G1")], ["category"])
    assert set(found) == {("hc", "G1"), ("hc", "G2")} and found[("hc", "G1")]["category"] == '["Food", "Allergen"]'
    store.close()


def test_an_unknown_date_is_kept_never_invented_and_never_replaces_a_known_one(gadget_type, db_path):
    store = Store(db_path)
    store.upsert(GADGET, [gadget(1, published=None), gadget(2)], source="hc")
    row = store.lookup.get(GADGET, {"source": "hc", "alert_id": "G1"})
    assert row["published"] is None and row["date_unknown"] == 1
    later = store.upsert(GADGET, [gadget(1, published=dt.date(2024, 6, 1)), gadget(2, published=None)], source="hc")
    assert (later.updated, later.unchanged) == (1, 1)
    assert store.lookup.get(GADGET, {"source": "hc", "alert_id": "G1"})["published"] == "2024-06-01"
    two = store.lookup.get(GADGET, {"source": "hc", "alert_id": "G2"})
    assert (two["published"], two["date_unknown"]) == ("2024-05-01", 0)
    assert store.lookup.newest_date(GADGET, "hc", dt.date(2024, 7, 1)) == "2024-06-01"
    store.close()


def test_the_full_text_index_covers_the_declared_text(gadget_type, db_path):
    store = Store(db_path)
    store.upsert(GADGET, [gadget(1, title_original="Electric kettle"), gadget(2, authority="Transport Canada")],
                 source="hc")
    if store.engine == "sqlite":
        def match(term):
            return sorted(r["alert_id"] for r in store.query(
                "SELECT alert_id FROM gadget_alerts WHERE id IN "
                "(SELECT rowid FROM gadget_alerts_fts WHERE gadget_alerts_fts MATCH ?)", [f'"{term}"']))
        assert match("ectric") == ["G1"] and match("Transport") == ["G2"]
        store.write(lambda db: db.conn.execute("UPDATE gadget_alerts SET title_ko = '전기 주전자' WHERE alert_id = 'G1'"))
        assert match("주전자") == ["G1"]
    else:
        assert store.scalar(dialect_of(store).query("SELECT COUNT(*) FROM pg_indexes WHERE indexname = 'gadget_alerts_search_windows'")) == 1
    store.close()


@pytest.fixture
def forget_types():
    yield
    forget_registered_types()


def test_a_field_added_to_a_model_becomes_a_column_and_rows_are_kept(db_path, forget_types):
    class V1(BaseModel):
        model_config = ConfigDict(extra="forbid")
        code: str
        name_original: str | None = None
        name_ko: str | None = None
        extra: dict = Field(default_factory=dict)

    class V2(V1):
        units: int | None = None

    first = RecordType(name="thing", title="Things", model=V1, table="things", key=("code",), translated=("name",))
    register_record_type(first)
    store = Store(db_path)
    store.upsert(first, [V1(code="a", name_original="Alpha")], source="s")
    store.close()
    second = RecordType(name="thing", title="Things", model=V2, table="things", key=("code",), translated=("name",))
    register_record_type(second)
    store = Store(db_path)
    assert "units" in _columns(store, "things")
    assert store.upsert(second, [V2(code="a", units=3)], source="s").updated == 1
    row = store.lookup.get(second, {"source": "s", "code": "a"})
    assert (row["name_original"], row["units"]) == ("Alpha", 3)
    store.close()


def test_a_type_module_dropped_into_record_types_gets_its_table_on_open(db_path, tmp_path, monkeypatch, forget_types):
    import record_types

    folder = tmp_path / "dropped"
    folder.mkdir()
    (folder / "parcel_notice.py").write_text(
        "from pydantic import BaseModel\n"
        "from basecrawler.recordtypes import RecordType\n\n\n"
        "class Parcel(BaseModel):\n"
        "    number: str\n"
        "    note_original: str | None = None\n"
        "    note_ko: str | None = None\n\n\n"
        "PARCEL = RecordType(name='parcel_notice', title='Parcels', model=Parcel, table='parcel_notices',\n"
        "                    key=('number',), translated=('note',))\n", encoding="utf-8")
    monkeypatch.setattr(record_types, "__path__", [*record_types.__path__, str(folder)])
    forget_registered_types()   # rediscover with the new folder
    store = Store(db_path)
    assert _columns(store, "parcel_notices")[:4] == ["id", "source", "number", "note_original"]
    assert store.lookup.count("parcel_notice") == 0
    store.close()


def test_the_same_recall_from_two_sources_and_types_is_linked_never_merged(gadget_type, db_path):
    from basecrawler import Recall

    store = Store(db_path)
    store.upsert("vehicle_recall", [Recall(country="CA", recall_number="2024-123", recall_date="2024-05-01",
                                 manufacturer_original="Ford")], source="ca")
    store.upsert("vehicle_recall", [Recall(country="US", recall_number="2024-123", recall_date="2024-05-01")], source="us")
    store.upsert(GADGET, [gadget("x", alert_id="2024-123", country="CA"), gadget("z", alert_id="2024-999", country="CA")],
                 source="hc")
    store.upsert(GADGET, [gadget("y", alert_id="2024-123", country=None)], source="cfia")
    ford = store.lookup.get("vehicle_recall", {"source": "ca", "country": "CA", "recall_number": "2024-123"})
    linked = store.lookup.same_as("vehicle_recall", ford)
    assert sorted((r["record_type"], r["source"], r.get("country")) for r in linked) == [
        ("gadget_alert", "cfia", None), ("gadget_alert", "hc", "CA")]     # not itself, not the US recall
    alert = store.lookup.get(GADGET, {"source": "hc", "alert_id": "2024-123"})
    back = store.lookup.same_as(GADGET, alert)
    assert sorted((r["record_type"], r["source"]) for r in back) == [("gadget_alert", "cfia"), ("vehicle_recall", "ca")]
    assert store.lookup.count("vehicle_recall") == 2 and store.lookup.count(GADGET) == 2 + 1   # nothing merged away
    assert store.lookup.same_as(GADGET, store.lookup.get(GADGET, {"source": "hc", "alert_id": "2024-999"})) == []
    store.close()


def test_search_indexes_of_every_type_can_be_rebuilt_after_rows_were_copied_in(gadget_type, tmp_path):
    store = Store(tmp_path / "copy.db")
    store.write(lambda db: db.conn.execute(
        "INSERT INTO gadget_alerts (source, alert_id, title_original, first_seen_at, updated_at) "
        "VALUES ('hc', 'G1', 'Copied kettle', 't', 't')"))   # as `migrate --to` copies rows

    def found():
        return store.scalar("SELECT COUNT(*) FROM gadget_alerts_fts WHERE gadget_alerts_fts MATCH 'kettle'")
    assert found() == 0
    store.records.rebuild_search_indexes()
    assert found() == 1
    store.close()


def test_a_declaration_that_cannot_work_is_refused_in_one_line_and_left_out(db_path, tmp_path, monkeypatch,
                                                                            forget_types, caplog):
    import record_types

    with pytest.raises(ValueError, match=r"^record type 'bad': key field 'nope' is not in the model; "
                                         r"translated 'colour' needs the field 'colour_original'"):
        RecordType(name="bad", title="Bad", model=GadgetAlert, table="bad", key=("nope",), translated=("colour",))
    folder = tmp_path / "dropped"
    folder.mkdir()
    (folder / "broken_type.py").write_text(
        "from basecrawler.recordtypes import RecordType\n"
        "from record_types.vehicle_recall import Recall\n"
        "BROKEN = RecordType(name='broken', title='B', model=Recall, table='broken', key=('serial',))\n",
        encoding="utf-8")
    monkeypatch.setattr(record_types, "__path__", [*record_types.__path__, str(folder)])
    forget_registered_types()
    store = Store(db_path)   # the other types still get their tables
    assert store.lookup.count("vehicle_recall") == 0
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == ["record types: module record_types.broken_type left out: ValueError: record type 'broken': "
                      "key field 'serial' is not in the model"]
    store.close()
