"""`--type NAME` and `--filter FIELD=VALUE` on search and export (issue 24.5): any declared
facet of the type; a multi-valued facet matches any of its values; an undeclared field or an
unknown type is a usage error (exit 2) that lists what exists; today's filters keep working."""
import json

import pytest

from basecrawler import Recall
from basecrawler.cli import main

RECALLS = [
    Recall(country="JP", recall_number="JP-1", recall_date="2024-05-02", source_lang="ja",
           manufacturer_original="トヨタ自動車株式会社", summary_original="ブレーキ", model_year="2019-2021"),
    Recall(country="US", recall_number="US-1", recall_date="2024-04-01", source_lang="en",
           manufacturer_original="Ford Motor Company", summary_original="Brake hose", model_year="2021"),
    Recall(country="CA", recall_number="CA-1", recall_date="2024-03-01", source_lang="en",
           manufacturer_original="FORD", summary_original="Fuel pump", model_year="2018"),
]


@pytest.fixture
def filled(store):
    store.upsert("vehicle_recall", RECALLS, source="test")
    return store


def numbers(capsys) -> list[str]:
    return [r["recall_number"] for r in json.loads(capsys.readouterr().out)]


def test_filter_on_a_declared_facet(filled, db_path, capsys):
    assert main(["--db", db_path, "search", "--json", "--filter", "manufacturer_key=ford"]) == 0
    assert numbers(capsys) == ["US-1", "CA-1"]
    assert main(["--db", db_path, "search", "--json", "--filter", "manufacturer_key=FORD",
                 "--filter", "country=ca"]) == 0
    assert numbers(capsys) == ["CA-1"]


def test_the_default_type_is_vehicle_recall_and_todays_filters_still_work(filled, db_path, capsys):
    assert main(["--db", db_path, "search", "--json", "--type", "vehicle_recall", "--manufacturer", "Ford",
                 "--year", "2021"]) == 0
    assert numbers(capsys) == ["US-1"]
    assert main(["--db", db_path, "search", "--json", "--year", "2020"]) == 0
    assert numbers(capsys) == ["JP-1"]


@pytest.mark.parametrize("command", [["search"], ["export", "-o", "-"]])
def test_an_undeclared_field_is_a_usage_error_listing_the_facets(filled, db_path, command, capsys):
    assert main(["--db", db_path, *command, "--filter", "colour=red"]) == 2
    assert capsys.readouterr().err == ("basecrawler: vehicle_recall has no facet 'colour'; "
                                       "facets: country, source, manufacturer_key, model_year\n")


def test_an_unknown_type_is_a_usage_error_listing_the_types(filled, db_path, capsys):
    assert main(["--db", db_path, "search", "--type", "spaceship"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("basecrawler: unknown record type 'spaceship'; known: ") and "vehicle_recall" in err


def test_a_filter_without_equals_is_a_usage_error(filled, db_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["--db", db_path, "search", "--filter", "country"])
    assert info.value.code == 2 and "FIELD=VALUE" in capsys.readouterr().err


def test_export_filters_by_facet(filled, db_path, capsys):
    assert main(["--db", db_path, "export", "--format", "jsonl", "-o", "-", "--filter", "country=JP"]) == 0
    assert [json.loads(line)["recall_number"] for line in capsys.readouterr().out.splitlines()] == ["JP-1"]


def test_country_accepts_names(filled, db_path, capsys):
    assert main(["--db", db_path, "search", "--json", "--country", "Japan"]) == 0
    assert numbers(capsys) == ["JP-1"]
