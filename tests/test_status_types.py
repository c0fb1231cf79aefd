"""`status` for types other than vehicle recalls: the newest date of each type a source stores
(not "-"), and how many records of each type have no known date (counted, never invented)."""
import datetime as dt

from basecrawler import Recall
from basecrawler.cli import main
from basecrawler.commands.status import collect_status
from basecrawler.recordtypes import get_record_type

NOW = dt.datetime(2024, 6, 10, 12, 0, tzinfo=dt.timezone.utc)


def _fill(store):
    model = get_record_type("product_alert").model
    store.upsert("product_alert", [
        model(country="CA", alert_id="N1", alert_date="2024-05-01", title_original="a"),
        model(country="CA", alert_id="N2", alert_date="2024-05-02", title_original="b"),
        model(country="CA", alert_id="N3", alert_date=None, title_original="undated"),
        model(country="CA", alert_id="N4", alert_date="not a date", title_original="unreadable"),
    ], source="hc")
    store.upsert("product_alert", [model(country="EU", alert_id="E1", alert_date="2024-04-01", title_original="c")],
                 source="eu")
    store.upsert("vehicle_recall", [Recall(country="EU", recall_number="E1", recall_date="2024-03-01"),
                          Recall(country="EU", recall_number="E2", recall_date="garbled")], source="eu")


def test_status_gives_the_newest_date_per_type_and_source(store):
    _fill(store)
    report = collect_status(store, ["hc", "eu"], now=NOW)
    assert report["sources"]["hc"]["newest_dates"] == {"product_alert": "2024-05-02"}
    assert report["sources"]["eu"]["newest_dates"] == {"product_alert": "2024-04-01", "vehicle_recall": "2024-03-01"}
    assert report["sources"]["eu"]["newest_recall_date"] == "2024-03-01"


def test_status_counts_records_without_a_known_date_per_type(store):
    _fill(store)
    report = collect_status(store, ["hc", "eu"], now=NOW)
    assert report["types"]["product_alert"]["date_unknown"] == 2
    assert report["types"]["product_alert"]["date_unknown_by_source"] == {"hc": 2}
    assert report["types"]["vehicle_recall"]["date_unknown"] == 1
    assert report["sources"]["hc"]["date_unknown_by_type"] == {"product_alert": 2}
    assert report["sources"]["eu"]["date_unknown_by_type"] == {"vehicle_recall": 1}
    # never invented: the undated alerts keep no date
    assert {r["alert_id"]: r["alert_date"] for r in store.query(
        "SELECT alert_id, alert_date FROM product_alerts WHERE date_unknown = 1")} == {"N3": None, "N4": None}


def test_status_text_shows_each_types_newest_date_and_the_undated(store, db_path, capsys, monkeypatch):
    monkeypatch.setattr("basecrawler.commands.status.discover", lambda: {})
    _fill(store)
    assert main(["status", "--lang", "en", "--db", db_path]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.strip().startswith("newest Product alerts 2024-05-02 (date unknown: Product alerts 2);")
               for line in lines)
    assert any(line.strip().startswith("newest Product alerts 2024-04-01, Vehicle recalls 2024-03-01 "
                                       "(date unknown: Vehicle recalls 1);") for line in lines)
    assert ["product_alert", "Product", "alerts", "1", "4", "5", "5", "2"] in [line.split() for line in lines]
