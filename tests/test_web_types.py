"""A record type the web view has never seen, dropped in from a temporary folder (an entry point
of the group `basecrawler.record_types`), gets its table, facets, card and chart from its
declaration alone — in the Datasette subprocess too — beside the vehicle recalls (#24.5)."""
import json
import os
import sys
import urllib.request

import pytest

from basecrawler import Store
from basecrawler.reading.browse import BrowseServer
from basecrawler.recordtypes.registry import forget_registered_types, register_record_type
from web_fixture import fill, free_port

pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")

TYPE_MODULE = '''
import datetime as dt
from pydantic import BaseModel, Field
from basecrawler.recordtypes import Facet, RecordType


class Gadget(BaseModel):
    country: str
    alert_id: str
    alert_date: dt.date | None = None
    date_unknown: bool = False
    title_original: str | None = None
    title_ko: str | None = None
    hazard_original: str | None = None
    hazard_ko: str | None = None
    category: list[str] = Field(default_factory=list)
    authority: str | None = None
    source_lang: str = "en"
    page_url: str | None = None


GADGET = RecordType(
    name="gadget_alert", title="Gadget alerts", model=Gadget, table="gadget_alerts", key=("country", "alert_id"),
    date_field="alert_date", date_optional=True, translated=("title", "hazard"),
    facets=(Facet("category", "Category", multi=True), Facet("authority", "Authority")),
    labels={"alert_id": "Alert", "alert_date": "Date", "title_original": "Title", "hazard_original": "Hazard",
            "category": "Category", "page_url": "Page"},
    display=("title", "hazard"), listing=("alert_date", "country", "alert_id", "category", "authority"),
    card=("alert_id", "alert_date", "category", "authority", "title", "hazard", "page_url"),
    url_fields=("page_url",))
'''


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode("utf-8")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dropin")
    (folder / "gadget_types.py").write_text(TYPE_MODULE, "utf-8")
    info = folder / "gadget_types-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gadget-types\nVersion: 1.0\n", "utf-8")
    (info / "entry_points.txt").write_text("[basecrawler.record_types]\ngadget = gadget_types\n", "utf-8")
    saved_path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder), saved_path) if p)   # the Datasette child
    sys.path.insert(0, str(folder))
    import gadget_types

    register_record_type(gadget_types.GADGET)   # this process discovered its types already
    try:
        db_path = fill(tmp_path_factory.mktemp("types") / "store.db")
        store = Store(db_path)
        gadget = gadget_types.Gadget
        store.upsert("gadget_alert", [
            gadget(country="CA", alert_id="G-1", alert_date="2024-05-10", title_original="Kettle lid may detach",
                   hazard_original="Burn hazard", category=["Kitchen", "Electrical"], authority="Health Canada",
                   page_url="https://recalls.example/g-1"),
            gadget(country="CA", alert_id="G-2", date_unknown=True, title_original="Toy magnets",
                   hazard_original="Ingestion hazard", category=["Toys"], authority="Health Canada",
                   page_url="javascript:alert(1)"),
            gadget(country="EU", alert_id="G-3", alert_date="2024-03-02", hazard_original="Electric shock",
                   category=["Electrical"], authority="Safety Gate"),
        ], source="gadgets")
        store.write(lambda db: db.conn.execute(
            "UPDATE gadget_alerts SET hazard_ko = '감전 위험', translated_at = '2024-07-01' WHERE alert_id = 'G-3'"))
        store.close()
        with BrowseServer(db_path, port=free_port()) as running:
            yield running
    finally:
        forget_registered_types()
        sys.path.remove(str(folder))
        sys.modules.pop("gadget_types", None)
        if saved_path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved_path


def facets(server, query: str = "") -> dict:
    data = json.loads(get(f"{server.url}/store/gadget_alerts.json?_extra=facet_results&_size=0&{query}"))
    results = data["facet_results"]
    results = results.get("results", results)
    return {name: [(v["value"], v["count"]) for v in facet["results"]] for name, facet in results.items()}


def test_the_new_type_has_its_declared_facets(server):
    found = facets(server)
    assert sorted(found["category"]) == [("Electrical", 2), ("Kitchen", 1), ("Toys", 1)]   # each listed value
    assert found["authority"] == [("Health Canada", 2), ("Safety Gate", 1)]
    assert ("date unknown", 1) in found["alert_date"] and ("2024-05", 1) in found["alert_date"]
    rows = json.loads(get(f"{server.url}/store/gadget_alerts.json?_bcf_category=Electrical&_shape=objects&_col=alert_id"))
    assert sorted(r["alert_id"] for r in rows["rows"]) == ["G-1", "G-3"]


def test_the_new_type_opens_on_its_declared_columns_with_best_text(server):
    page = get(f"{server.url}/store/gadget_alerts")
    columns = [c for c in ("alert_date", "country", "alert_id", "category", "authority", "title_ko", "page_url")]
    for column in columns:
        assert f'data-column="{column}"' in page, column
    assert 'data-column="hazard_original"' not in page
    assert "Kitchen, Electrical" in page                     # a list reads as words
    assert "감전 위험" in page and "Electric shock" in page    # no title: the hazard, in Korean
    assert "차량 리콜" in page                                # the other type is a click away


def test_the_new_type_has_a_card_and_a_chart(server):
    rows = json.loads(get(f"{server.url}/store/gadget_alerts.json?_shape=objects&_col=alert_id"))["rows"]
    ids = {r["alert_id"]: r["id"] for r in rows}
    card = get(f"{server.url}/store/gadget_alerts/{ids['G-2']}")
    card = card[card.index('<article class="bc-card">'):card.index("</article>")]
    # Headed by what was recalled (the best text without a declared heading), the number beneath.
    assert "G-2" in card and "<dt>날짜</dt><dd>날짜 미상</dd>" in card.replace("Date", "날짜") and "Toys" in card
    assert "javascript:alert(1)" in card and 'href="javascript' not in card
    months = json.loads(get(f"{server.url}/store/gadget_alert_per_month.json?_shape=objects"))["rows"]
    assert [(r["month"], r["country"], r["records"]) for r in months if r["records"]] == \
        [("2024-03", "EU", 1), ("2024-05", "CA", 1)]
    assert len({r["month"] for r in months}) == 3              # 2024-04 with nothing is there too
