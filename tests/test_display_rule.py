"""The display rule (issues 21, 24.5): every screen shows the best text a record has — the
type's declared `display` fields in order ("summary, else cause, else component" for vehicle
recalls), Korean when translated, else the original — in search's table and JSON and in
every export format."""
import csv
import json

import pytest
from openpyxl import load_workbook

from basecrawler import Recall
from basecrawler.cli import main

RECALLS = [
    # JP records have no summary: the cause is their best text (issue 21: "번역 대기" before).
    Recall(country="JP", recall_number="JP-1", recall_date="2024-05-02", source_lang="ja",
           defect_cause_original="燃料ホースの材質が不適切", component_original="燃料装置"),
    Recall(country="JP", recall_number="JP-2", recall_date="2024-05-01", source_lang="ja",
           component_original="電気装置(灯火装置)"),
    Recall(country="US", recall_number="US-1", recall_date="2024-04-01", source_lang="en",
           summary_original="Brake hose may rupture", defect_cause_original="Bad crimp"),
]
EXPECTED = {"JP-1": "연료 호스 재질 부적절", "JP-2": "電気装置(灯火装置)", "US-1": "Brake hose may rupture"}


@pytest.fixture
def filled(store):
    store.upsert("vehicle_recall", RECALLS, source="test")
    store.write(lambda db: db.conn.execute(
        "UPDATE recalls SET defect_cause_ko = '연료 호스 재질 부적절', translated_at = '2024-05-03T00:00:00+00:00' "
        "WHERE recall_number = 'JP-1'"))
    return store


def test_search_json_carries_the_best_text(filled, db_path, capsys):
    assert main(["--db", db_path, "search", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["recall_number"]: r["best_text"] for r in rows} == EXPECTED


def test_search_table_shows_the_best_text(filled, db_path, capsys):
    assert main(["--db", db_path, "search"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for number, text in EXPECTED.items():
        line = next(line for line in lines if number in line)
        assert line.rstrip().endswith(text)


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "xlsx"])
def test_every_export_has_the_best_text(filled, db_path, tmp_path, fmt):
    out = tmp_path / f"x.{fmt}"
    assert main(["--db", db_path, "export", "-o", str(out), "--lang", "en"]) == 0
    if fmt == "csv":
        with open(out, encoding="utf-8-sig", newline="") as handle:
            found = {r["recall_number"]: r["best_text"] for r in csv.DictReader(handle)}
    elif fmt == "jsonl":
        found = {r["recall_number"]: r["best_text"] for r in map(json.loads, out.read_text("utf-8").splitlines())}
    else:
        rows = list(load_workbook(out).active.iter_rows(values_only=True))
        found = {r[rows[0].index("Recall number")]: r[rows[0].index("Text shown (Korean when translated)")]
                 for r in rows[1:]}
    assert found == EXPECTED
