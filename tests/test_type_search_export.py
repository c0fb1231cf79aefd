"""Search, export, status and types on a record type other than vehicle recalls (issue 24.5),
declared in the test and registered in-process: everything comes from the declaration —
table, text index, columns, labels, date field, facets, display rule. A multi-valued facet
(a JSON list) matches any of its values; a record without a date is kept and listed last."""
import csv
import datetime as dt
import json
from typing import Any

import pytest
from openpyxl import load_workbook
from pydantic import BaseModel, Field

from pgcluster import pg_cluster, pg_url  # noqa: F401  (fixtures)

from basecrawler import Store
from basecrawler.cli import main
from basecrawler.recordtypes import Facet, RecordType, register_record_type
from basecrawler.recordtypes.registry import forget_registered_types
from basecrawler.reading.search import RecallFilter, count, search


class Alert(BaseModel):
    country: str
    alert_id: str
    alert_date: dt.date | None = None
    title_original: str | None = None
    title_ko: str | None = None
    hazard_original: str | None = None
    hazard_ko: str | None = None
    category: list[str] = Field(default_factory=list)
    authority: str | None = None
    source_url: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


ALERT = RecordType(
    name="test_alert", title="Test alerts", model=Alert, table="test_alerts", key=("country", "alert_id"),
    date_field="alert_date", date_optional=True, date_sentinel=None, translated=("title", "hazard"),
    searchable=("alert_id", "category"),
    facets=(Facet("category", "Category", multi=True), Facet("authority", "Authority"), Facet("source", "Source")),
    labels={"alert_id": "Alert id", "alert_date": "Date", "title_original": "Title", "title_ko": "Title (Korean)",
            "hazard_original": "Hazard", "hazard_ko": "Hazard (Korean)", "category": "Category",
            "authority": "Authority", "source_url": "Source link", "country": "Country"},
    display=("title", "hazard"),
    listing=("alert_date", "country", "alert_id", "category", "authority"),
)

ALERTS = [
    Alert(country="CA", alert_id="A-1", alert_date="2024-05-02", title_original="Peanut butter recalled",
          category=["Food"], authority="CFIA", source_url="https://example.org/a1"),
    Alert(country="CA", alert_id="A-2", alert_date="2024-05-03", title_original="=HYPERLINK(\"http://evil\")",
          category=["Food", "Consumer products"], authority="Health Canada"),
    Alert(country="CA", alert_id="A-3", alert_date=None, hazard_original="Choking hazard (no title)",
          category=["Consumer products"], authority="Health Canada"),
]


@pytest.fixture
def alerts_db(db_path, monkeypatch):
    for command in ("search", "export"):   # the sources of these records, as if registered
        monkeypatch.setattr(f"basecrawler.commands.{command}.discover", lambda: {"hc": None, "eu": None})
    register_record_type(ALERT)
    store = Store(db_path)
    try:
        store.upsert(ALERT, ALERTS, source="hc")
        store.upsert(ALERT, [Alert(country="EU", alert_id="A-1", alert_date="2024-04-01", title_original="Toy",
                                   category=["Toys"], authority="EU")], source="eu")
    finally:
        store.close()
    yield db_path
    forget_registered_types()


def _numbers(capsys):
    return [r["alert_id"] for r in json.loads(capsys.readouterr().out)]


def test_a_multi_valued_facet_matches_any_of_its_values(alerts_db, capsys):
    assert main(["--db", alerts_db, "search", "--type", "test_alert", "--json", "--filter", "category=food"]) == 0
    assert _numbers(capsys) == ["A-2", "A-1"]
    assert main(["--db", alerts_db, "search", "--type", "test_alert", "--json",
                 "--filter", "category=Consumer products"]) == 0
    assert _numbers(capsys) == ["A-2", "A-3"]        # the undated record last, not lost


def test_text_search_uses_the_types_own_index_and_shows_its_best_text(alerts_db, capsys):
    assert main(["--db", alerts_db, "search", "--type", "test_alert", "--json", "peanut"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["alert_id"] for r in rows] == ["A-1"] and rows[0]["best_text"] == "Peanut butter recalled"
    assert rows[0]["category"] == ["Food"]                       # a JSON list, decoded
    assert main(["--db", alerts_db, "search", "--type", "test_alert", "--json", "choking"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["best_text"] == "Choking hazard (no title)"   # else the hazard


def test_the_table_is_the_types_listing(alerts_db, capsys):
    assert main(["--db", alerts_db, "search", "--lang", "en", "--type", "test_alert", "--source", "hc"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["date", "country", "alert", "id", "category", "authority", "text"]
    assert "unknown" in next(line for line in lines if "A-3" in line)
    assert lines[-1] == "3 of 3 matching test alerts"


def test_vehicle_options_on_a_type_without_their_columns_are_usage_errors(alerts_db, capsys):
    assert main(["--db", alerts_db, "search", "--type", "test_alert", "--manufacturer", "Ford"]) == 2
    assert capsys.readouterr().err == ("basecrawler: --manufacturer does not apply to test_alert "
                                       "(it declares no facet for --manufacturer)\n")


def test_export_of_a_type_with_source_and_facet(alerts_db, tmp_path):
    out = tmp_path / "food.csv"
    assert main(["--db", alerts_db, "export", "--type", "test_alert", "--source", "hc", "--filter", "category=Food",
                 "-o", str(out)]) == 0
    with open(out, encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["alert_id"] for r in rows] == ["A-2", "A-1"]
    assert rows[0]["title_original"] == "'=HYPERLINK(\"http://evil\")"          # neutralised
    assert rows[1]["best_text"] == "Peanut butter recalled"


def test_xlsx_of_a_type_uses_its_labels_and_dates(alerts_db, tmp_path):
    out = tmp_path / "alerts.xlsx"
    assert main(["--db", alerts_db, "export", "--type", "test_alert", "-o", str(out), "--lang", "en"]) == 0
    sheet = load_workbook(out).active
    rows = list(sheet.iter_rows(values_only=True))
    header = list(rows[0])
    assert header[:5] == ["Country", "Alert id", "Date", "Text shown (Korean when translated)", "Title (Korean)"]
    assert "id" not in header and "Translation status" not in header and header[-1] == "Extra"
    by_id = {(r[0], r[1]): dict(zip(header, r)) for r in rows[1:]}
    assert by_id[("CA", "A-1")]["Date"] == dt.datetime(2024, 5, 2)
    assert by_id[("CA", "A-2")]["Category"] == "Food, Consumer products"
    assert by_id[("CA", "A-3")]["Date"] is None


def test_status_and_types_count_the_type_per_source(alerts_db, capsys, monkeypatch):
    monkeypatch.setattr("basecrawler.commands.status.discover", lambda: {})
    assert main(["--db", alerts_db, "status", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["types"]["test_alert"]["sources"] == {"eu": 1, "hc": 3}
    assert report["sources"]["hc"]["records_by_type"] == {"test_alert": 3}
    assert main(["--db", alerts_db, "types", "--json"]) == 0
    alert = {t["name"]: t for t in json.loads(capsys.readouterr().out)}["test_alert"]
    assert alert["records"] == 4
    assert {"field": "category", "label": "Category", "multi": True} in alert["facets"]


def test_facets_and_text_on_postgresql(pg_url):  # noqa: F811
    register_record_type(ALERT)
    store = Store(pg_url)
    try:
        store.upsert(ALERT, ALERTS, source="hc")
        conn = store.db.conn

        def ids(**filters):
            return [r["alert_id"] for r in search(conn, RecallFilter(record_type="test_alert", **filters))]

        assert ids(facets=(("category", "food"),)) == ["A-2", "A-1"]
        assert ids(facets=(("category", "Consumer products"),)) == ["A-2", "A-3"]   # undated last
        assert ids(facets=(("authority", "cfia"),)) == ["A-1"]
        assert ids(text="peanut") == ["A-1"]
        assert count(conn, RecallFilter(record_type="test_alert", source="hc")) == 3
    finally:
        store.close()
        forget_registered_types()
