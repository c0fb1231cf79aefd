"""Outputs never execute (issue 22.4): hostile publisher text written to CSV and XLSX is shown,
never evaluated. CSV cells starting with = + - @ TAB CR get OWASP's `'` prefix; XLSX writes text
as string cells (no `<f>` in the sheet XML but the project's own http(s) HYPERLINK) and leaves
the store's bookkeeping columns out."""
import csv
import re
import zipfile

import pytest
from openpyxl import load_workbook

from basecrawler import Recall
from basecrawler.reading.cellsafe import neutralise_cell
from basecrawler.reading.export import export_recalls
from basecrawler.reading.search import RecallFilter

HOSTILE = {
    "summary_original": '=HYPERLINK("http://evil/x","click")',
    "defect_cause_original": "=cmd|' /C calc'!A0",
    "consequence_original": "+1+cmd|' /C calc'!A0",
    "remedy_original": "-2+cmd|' /C calc'!A0",
    "component_original": "@SUM(1+1)*cmd|' /C calc'!A0",
    "model_original": "\t=1+1",
    "manufacturer_original": "\r=1+1",
}


@pytest.fixture
def hostile(store):
    store.upsert("vehicle_recall", [Recall(country="US", recall_number="H-1", recall_date="2024-02-01", source_lang="en",
                                 summary_original="placeholder", source_url="https://example.org/r/H-1"),
                          Recall(country="US", recall_number="H-2", recall_date="2024-01-01", source_lang="en",
                                 summary_original="a link that is not http", source_url="https://example.org/ok")],
                         source="test")
    # Written straight into the table: the model trims leading whitespace, a store written by
    # another tool (or an older version) need not have.
    sets = ", ".join(f"{column} = ?" for column in HOSTILE)
    store.write(lambda db: db.conn.execute(f"UPDATE recalls SET {sets}, affected_units = -5 WHERE recall_number = 'H-1'",
                                           list(HOSTILE.values())))
    store.write(lambda db: db.conn.execute(
        "UPDATE recalls SET source_url = 'javascript:alert(document.domain)', summary_ko = '=1+2' "
        "WHERE recall_number = 'H-2'"))
    return store


@pytest.mark.parametrize("text", ["=1+1", "+1", "-1", "@x", "\t=1", "\r=1"])
def test_text_starting_with_a_formula_trigger_is_prefixed(text):
    assert neutralise_cell(text) == "'" + text


@pytest.mark.parametrize("value", ["Brake hose", "1 - 2", "", None, -5, 3.5, "ブレーキ"])
def test_everything_else_is_left_alone(value):
    assert neutralise_cell(value) == value


def test_csv_cells_are_neutralised_and_numbers_stay_numbers(hostile, tmp_path):
    out = tmp_path / "x.csv"
    export_recalls(hostile.db.conn, RecallFilter(), "csv", out)
    with open(out, encoding="utf-8-sig", newline="") as handle:
        rows = {r["recall_number"]: r for r in csv.DictReader(handle)}
    for column, text in HOSTILE.items():
        assert rows["H-1"][column] == "'" + text
    assert rows["H-1"]["affected_units"] == "-5"            # a number, not text: no prefix
    assert rows["H-2"]["summary_ko"] == "'=1+2"
    for row in rows.values():
        text = [value for column, value in row.items() if column != "affected_units"]
        assert not any(value.startswith(("=", "+", "-", "@", "\t", "\r")) for value in text)


def _sheet_xml(path) -> str:
    with zipfile.ZipFile(path) as archive:
        return archive.read("xl/worksheets/sheet1.xml").decode("utf-8")


def test_xlsx_has_no_formula_but_the_projects_http_links(hostile, tmp_path):
    out = tmp_path / "x.xlsx"
    export_recalls(hostile.db.conn, RecallFilter(), "xlsx", out)
    formulas = re.findall(r"<f>(.*?)</f>", _sheet_xml(out), flags=re.S)
    assert formulas == ['HYPERLINK("https://example.org/r/H-1","https://example.org/r/H-1")']


def test_xlsx_text_cells_are_strings_showing_the_neutralised_text(hostile, tmp_path):
    out = tmp_path / "x.xlsx"
    export_recalls(hostile.db.conn, RecallFilter(), "xlsx", out)
    sheet = load_workbook(out).active
    header = [c.value for c in sheet[1]]
    cells = {name: cell for name, cell in zip(header, sheet[2])}
    assert cells["Summary"].data_type == "s"
    assert cells["Summary"].value == "'" + HOSTILE["summary_original"]
    assert cells["Defect / cause"].value == "'" + HOSTILE["defect_cause_original"]
    assert cells["Model"].value == "'" + HOSTILE["model_original"]
    assert cells["Affected units"].value == -5 and cells["Affected units"].data_type == "n"
    second = {name: cell for name, cell in zip(header, sheet[3])}
    # A javascript: link is text, neither a HYPERLINK nor a live formula.
    assert second["Source link"].value == "javascript:alert(document.domain)"
    assert second["Source link"].data_type == "s"
    assert second["Summary (Korean)"].value == "'=1+2"


def test_xlsx_text_that_looks_like_an_error_code_stays_text(hostile, tmp_path):
    # openpyxl would write "#REF!" as an error cell; publisher text is always a string cell.
    hostile.write(lambda db: db.conn.execute("UPDATE recalls SET summary_ko = '#REF!' WHERE recall_number = 'H-1'"))
    out = tmp_path / "x.xlsx"
    export_recalls(hostile.db.conn, RecallFilter(), "xlsx", out)
    sheet = load_workbook(out).active
    header = [c.value for c in sheet[1]]
    cell = sheet[2][header.index("Summary (Korean)")]
    assert (cell.value, cell.data_type) == ("#REF!", "s")


def test_xlsx_leaves_out_the_stores_bookkeeping(hostile, tmp_path):
    hostile.write(lambda db: db.conn.execute(
        "UPDATE recalls SET translation_status = 'translated', translation_note = 'n', "
        "translation_claimed_by = 'worker-on-host-zq', translation_claimed_at = '2024-01-01T00:00:00+00:00'"))
    out = tmp_path / "x.xlsx"
    export_recalls(hostile.db.conn, RecallFilter(), "xlsx", out)
    header = [c.value for c in load_workbook(out).active[1]]
    assert not [h for h in header if re.search(r"(?i)row id|claim|translation status|translation note|^id$|input.hash", h)]
    assert "Translated (UTC)" in header
    assert "worker-on-host-zq" not in _sheet_xml(out)
