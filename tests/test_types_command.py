"""`basecrawler types` lists the record types with their fields, facets and counts; `status`
counts records per type and source (issue 24.5)."""
import json

import pytest

from basecrawler import Recall
from basecrawler.cli import main


@pytest.fixture
def filled(store):
    store.upsert("vehicle_recall", [Recall(country="JP", recall_number="JP-1", recall_date="2024-05-02", source_lang="ja"),
                          Recall(country="JP", recall_number="JP-2", recall_date="2024-05-01", source_lang="ja")],
                         source="jp")
    store.upsert("vehicle_recall", [Recall(country="US", recall_number="US-1", recall_date="2024-04-01")], source="us")
    return store


def test_types_json_lists_fields_facets_and_counts(filled, db_path, capsys):
    assert main(["--db", db_path, "types", "--json"]) == 0
    types = {t["name"]: t for t in json.loads(capsys.readouterr().out)}
    vehicle = types["vehicle_recall"]
    assert vehicle["records"] == 3 and vehicle["sources"] == {"jp": 2, "us": 1}
    assert {"field": "model_year", "label": "Model year", "multi": False} in vehicle["facets"]
    assert {"field": "summary", "label": "Summary", "translated": True} in vehicle["fields"]
    assert vehicle["key"] == ["source", "country", "recall_number"] and vehicle["date_field"] == "recall_date"


def test_types_text_is_a_table(filled, db_path, capsys):
    assert main(["--db", db_path, "types", "--lang", "en"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["type", "title", "records", "sources", "facets"]
    vehicle = next(line for line in lines[2:] if line.startswith("vehicle_recall "))
    assert "Vehicle recalls" in vehicle and "jp 2, us 1" in vehicle


def test_types_without_a_database_lists_types_and_creates_nothing(tmp_path, capsys):
    db = tmp_path / "none.db"
    assert main(["--db", str(db), "types", "--json"]) == 0
    vehicle = {t["name"]: t for t in json.loads(capsys.readouterr().out)}["vehicle_recall"]
    assert vehicle["records"] is None
    assert list(tmp_path.iterdir()) == []


def test_status_counts_per_type_and_source(filled, db_path, capsys, monkeypatch):
    monkeypatch.setattr("basecrawler.commands.status.discover", lambda: {})
    assert main(["--db", db_path, "status", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["types"]["vehicle_recall"] == {"title": "Vehicle recalls", "records": 3, "groups": 3,
                                                 "sources": {"jp": 2, "us": 1},
                                                 "date_unknown": 0, "date_unknown_by_source": {}}
    assert report["sources"]["jp"]["records_by_type"] == {"vehicle_recall": 2}
    assert report["records"] == 3
    assert main(["--db", db_path, "status", "--lang", "en"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["type", "title", "jp", "us", "total", "distinct", "recalls", "date", "unknown"]
    assert ["vehicle_recall", "Vehicle", "recalls", "2", "1", "3", "3", "0"] in [line.split() for line in lines[3:]]
