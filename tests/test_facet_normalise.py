"""A facet normalises what a user types (`Facet(normalise=…)`), and a named option
(`--manufacturer`) filters through the facet declared for it: search reads the declaration, the
vehicle maker-name table lives beside its type (record_types/vehicle_makers.py)."""
import datetime as dt

import pytest
from pydantic import BaseModel

from basecrawler import Recall
from basecrawler.reading.search import RecallFilter, UnknownFilter, count, search
from basecrawler.recordtypes import Facet, RecordType, register_record_type
from basecrawler.recordtypes.registry import forget_registered_types


def _vehicles(store):
    store.upsert("vehicle_recall", [
        Recall(country="US", recall_number="1", recall_date="2024-01-01", manufacturer_original="Ford Motor Company"),
        Recall(country="CA", recall_number="2", recall_date="2024-01-02", manufacturer_original="FORD MOTOR CO."),
        Recall(country="JP", recall_number="3", recall_date="2024-01-03", manufacturer_original="トヨタ自動車株式会社"),
    ], source="demo")


def _numbers(store, **filters):
    return sorted(r["recall_number"] for r in search(store.db.conn, RecallFilter(**filters)))


def test_a_facet_filter_is_normalised_through_the_declaration(store):
    _vehicles(store)
    assert _numbers(store, facets=(("manufacturer_key", "Ford Motor Company of Canada, Ltd."),)) == ["1", "2"]
    assert _numbers(store, facets=(("manufacturer_key", "TOYOTA MOTOR NORTH AMERICA, INC."),)) == ["3"]


def test_manufacturer_option_finds_every_spelling_of_the_maker(store):
    _vehicles(store)
    assert _numbers(store, manufacturer="Ford Motor Company of Canada") == ["1", "2"]
    assert _numbers(store, manufacturer="toyota") == ["3"]
    assert _numbers(store, manufacturer="自動車") == ["3"]          # a substring of the published name


class Gadget(BaseModel):
    country: str
    gadget_id: str
    made: dt.date | None = None
    maker_original: str | None = None
    maker_ko: str | None = None
    maker_code: str | None = None


GADGET = RecordType(
    name="test_gadget", title="Test gadgets", model=Gadget, table="test_gadgets", key=("country", "gadget_id"),
    date_field="made", translated=("maker",),
    facets=(Facet("maker_code", "Maker", normalise=lambda v: v.strip().upper()[:3] if v else None,
                  option="manufacturer", also_text="maker"),),
    derived=lambda row: {}, derived_columns={},
)


@pytest.fixture
def gadgets(db_path):
    from basecrawler import Store

    register_record_type(GADGET)   # before the store opens, so it makes the type's table
    store = Store(db_path)
    store.upsert(GADGET, [Gadget(country="XX", gadget_id="g1", maker_original="Acme Works", maker_code="ACM"),
                          Gadget(country="XX", gadget_id="g2", maker_original="Bolt Ltd", maker_code="BOL")],
                 source="demo")
    yield store
    store.close()
    forget_registered_types()


def test_any_type_declares_the_facet_manufacturer_filters_by(gadgets):
    conn = gadgets.db.conn
    assert count(conn, RecallFilter(record_type="test_gadget", manufacturer="acme corporation")) == 1
    assert count(conn, RecallFilter(record_type="test_gadget", manufacturer="Works")) == 1        # also_text
    assert count(conn, RecallFilter(record_type="test_gadget", facets=(("maker_code", " bolt "),))) == 1


def test_manufacturer_on_a_type_that_declares_no_facet_for_it_is_a_usage_error(store):
    with pytest.raises(UnknownFilter, match=r"--manufacturer does not apply to product_alert \(it declares no facet"):
        count(store.db.conn, RecallFilter(record_type="product_alert", manufacturer="Ford"))


def test_also_text_must_name_a_translated_field():
    with pytest.raises(ValueError, match="also_text 'nope' is not a translated field"):
        RecordType(name="bad", title="Bad", model=Gadget, table="bad", key=("gadget_id",),
                   facets=(Facet("maker_code", "Maker", also_text="nope"),))


def test_a_ranged_facet_matches_a_value_inside_a_stored_range(store):
    store.upsert("vehicle_recall", [
        Recall(country="US", recall_number="r", recall_date="2024-01-01", model_year="2019-2021"),
        Recall(country="US", recall_number="s", recall_date="2024-01-02", model_year="2020"),
        Recall(country="US", recall_number="t", recall_date="2024-01-03", model_year="2022"),
    ], source="demo")
    assert _numbers(store, year=2020) == ["r", "s"]
    assert _numbers(store, facets=(("model_year", "2021"),)) == ["r"]   # --filter agrees with the facet's counts
    assert _numbers(store, year=2018) == []


def test_year_on_a_type_that_declares_no_facet_for_it_is_a_usage_error(store):
    with pytest.raises(UnknownFilter, match=r"--year does not apply to product_alert"):
        count(store.db.conn, RecallFilter(record_type="product_alert", year=2020))
