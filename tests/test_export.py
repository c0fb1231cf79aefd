"""Export: CSV with a BOM for Excel, JSON Lines, XLSX with header and frozen pane; all fields,
streamed from a cursor, written atomically."""
import csv
import datetime as dt
import json

import pytest
from openpyxl import load_workbook
from openpyxl.utils import get_column_letter

from basecrawler import Recall
from basecrawler.cli import main
from basecrawler.reading.export import export_recalls
from basecrawler.reading.search import RecallFilter

RECALLS = [
    Recall(country="JP", recall_number="JP-4980", recall_date="2024-03-14", source_lang="ja",
           manufacturer_original="トヨタ自動車株式会社", model_original="プリウス",
           summary_original="ブレーキホースが損傷し、\n制動力が低下するおそれ。", affected_units="9,972台",
           extra={"vehicles": [{"型式": "ZVW51", "台数": 9972}]}),
    Recall(country="US", recall_number="24V-101", recall_date="2024-02-20", source_lang="en",
           manufacturer_original="Ford Motor Company", model_original="F-150",
           summary_original='Rear "brake" hose, may rupture; comma, quote', model_year="2021"),
    Recall(country="CA", recall_number="2024-150", recall_date="2023-11-30", source_lang="en",
           manufacturer_original="Ford", summary_original="Brake fluid may leak."),
]


@pytest.fixture
def filled(store):
    store.upsert("vehicle_recall", RECALLS, source="test")
    store.write(lambda db: db.conn.execute(
        "UPDATE recalls SET summary_ko = '브레이크 호스 손상', translated_at = '2024-03-15T00:00:00+00:00' "
        "WHERE recall_number = 'JP-4980'"))
    return store


def table_columns(store):
    return [c.name for c in store.db["recalls"].columns]


def test_csv_starts_with_utf8_bom(filled, tmp_path):
    out = tmp_path / "recalls.csv"
    export_recalls(filled.db.conn, RecallFilter(), "csv", out)
    assert out.read_bytes()[:3] == b"\xef\xbb\xbf"


def test_csv_round_trips_every_field_through_the_csv_module(filled, tmp_path):
    out = tmp_path / "recalls.csv"
    assert export_recalls(filled.db.conn, RecallFilter(), "csv", out) == 3
    with open(out, encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == [*table_columns(filled), "best_text"]
    by_number = {r["recall_number"]: r for r in rows}
    jp = by_number["JP-4980"]
    assert jp["summary_original"] == "ブレーキホースが損傷し、\n制動力が低下するおそれ。"
    assert jp["summary_ko"] == "브레이크 호스 손상"
    assert jp["best_text"] == "브레이크 호스 손상"                      # the display rule: Korean when translated
    assert by_number["2024-150"]["best_text"] == "Brake fluid may leak."   # else the original
    assert jp["affected_units"] == "9972"
    assert jp["manufacturer_key"] == "TOYOTA" and jp["manufacturer_original"] == "トヨタ自動車株式会社"
    assert json.loads(jp["extra"]) == {"vehicles": [{"型式": "ZVW51", "台数": 9972}]}
    assert by_number["24V-101"]["summary_original"] == 'Rear "brake" hose, may rupture; comma, quote'
    assert [r["recall_number"] for r in rows] == ["JP-4980", "24V-101", "2024-150"]   # newest first


def test_jsonl_has_one_object_per_record_with_extra_as_object(filled, tmp_path):
    out = tmp_path / "recalls.jsonl"
    export_recalls(filled.db.conn, RecallFilter(), "jsonl", out)
    lines = out.read_text("utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 3 and list(records[0]) == [*table_columns(filled), "best_text"]
    assert records[0]["extra"] == {"vehicles": [{"型式": "ZVW51", "台数": 9972}]}
    assert "トヨタ" in lines[0]        # readable text, not \u escapes


def xlsx_rows(conn, tmp_path):
    out = tmp_path / "recalls.xlsx"
    export_recalls(conn, RecallFilter(), "xlsx", out)
    sheet = load_workbook(out).active
    rows = list(sheet.iter_rows(values_only=True))
    return sheet, list(rows[0]), [dict(zip(rows[0], r)) for r in rows[1:]]


def test_xlsx_opens_with_openpyxl_and_has_every_row(filled, tmp_path):
    out = tmp_path / "recalls.xlsx"
    assert export_recalls(filled.db.conn, RecallFilter(), "xlsx", out) == 3
    _, header, rows = xlsx_rows(filled.db.conn, tmp_path)
    internal = {"id", "input_hash", "translation_status", "translation_note", "translation_claimed_at",
                "translation_claimed_by"}
    # every column a reader needs, none lost, and the text the record is shown by
    assert len(header) == len(set(table_columns(filled)) - internal) + 1
    assert [r["Recall number"] for r in rows] == ["JP-4980", "24V-101", "2024-150"]
    assert rows[0]["Summary (Korean)"] == "브레이크 호스 손상"
    assert rows[0]["Manufacturer key"] == "TOYOTA"
    assert rows[0]["Text shown (Korean when translated)"] == "브레이크 호스 손상"


def test_xlsx_headers_are_readable_in_a_reading_order_with_extra_last(filled, tmp_path):
    _, header, _ = xlsx_rows(filled.db.conn, tmp_path)
    # Labels are the record type's declared ones (record_types/vehicle_recall.py).
    assert header[:7] == ["Country", "Recall number", "Recall date", "Text shown (Korean when translated)",
                          "Manufacturer key", "Manufacturer (Korean)", "Manufacturer"]
    assert "Source link" in header and "recall_number" not in header
    assert header[-1] == "Extra"


def test_xlsx_dates_are_date_cells(filled, tmp_path):
    sheet, header, rows = xlsx_rows(filled.db.conn, tmp_path)
    assert rows[0]["Recall date"] == dt.datetime(2024, 3, 14)          # a date, not the text "2024-03-14"
    assert sheet.cell(row=2, column=header.index("Recall date") + 1).number_format == "yyyy-mm-dd"
    assert rows[0]["Translated (UTC)"] == dt.datetime(2024, 3, 15, 0, 0)
    assert isinstance(rows[0]["First seen (UTC)"], dt.datetime)


def test_xlsx_leaves_an_unreadable_date_empty(store, tmp_path):
    store.upsert("vehicle_recall", [Recall(country="US", recall_number="X1", recall_date=None, source_lang="en",
                                 summary_original="no date")], source="test")
    _, _, rows = xlsx_rows(store.db.conn, tmp_path)
    assert rows[0]["Recall date"] is None and rows[0]["Date unknown"] == 1


def test_xlsx_has_styled_frozen_header_autofilter_and_sized_columns(filled, tmp_path):
    sheet, header, _ = xlsx_rows(filled.db.conn, tmp_path)
    assert sheet.freeze_panes == "A2"
    assert sheet["A1"].font.bold
    assert sheet.auto_filter.ref == f"A1:{get_column_letter(len(header))}4"
    summary = get_column_letter(header.index("Summary") + 1)
    assert sheet.column_dimensions["A"].width == 16 and sheet.column_dimensions[summary].width == 40


def test_xlsx_source_links_are_clickable(store, tmp_path):
    store.upsert("vehicle_recall", [Recall(country="US", recall_number="24V-101", recall_date="2024-02-20", source_lang="en",
                                 source_url="https://example.org/recall?id=24V-101")], source="test")
    sheet, header, rows = xlsx_rows(store.db.conn, tmp_path)
    assert rows[0]["Source link"] == '=HYPERLINK("https://example.org/recall?id=24V-101","https://example.org/recall?id=24V-101")'
    assert sheet.cell(row=2, column=header.index("Source link") + 1).font.underline == "single"


def test_xlsx_strips_control_characters_excel_rejects(store, tmp_path):
    store.upsert("vehicle_recall", [Recall(country="US", recall_number="X1", recall_date="2024-01-01",
                                 summary_original="bad\x0bchar\x1fhere")], source="test")
    out = tmp_path / "recalls.xlsx"
    export_recalls(store.db.conn, RecallFilter(), "xlsx", out)
    sheet = load_workbook(out).active
    header = [c.value for c in sheet[1]]
    assert sheet.cell(row=2, column=header.index("Summary") + 1).value == "badcharhere"


def test_export_applies_search_filters(filled, tmp_path):
    out = tmp_path / "jp.csv"
    export_recalls(filled.db.conn, RecallFilter(text="브레이크", countries=("JP",)), "csv", out)
    with open(out, encoding="utf-8-sig", newline="") as handle:
        assert [r["recall_number"] for r in csv.DictReader(handle)] == ["JP-4980"]


def test_export_streams_rows_from_the_cursor(filled, tmp_path, monkeypatch):
    # The writer must see a lazy iterator, never a list of every row.
    import basecrawler.reading.export as export

    seen = {}
    real = export.write_csv

    def spy(columns, rows, binary):
        seen["rows"] = rows
        return real(columns, rows, binary)

    monkeypatch.setattr(export, "write_csv", spy)
    export_recalls(filled.db.conn, RecallFilter(), "csv", tmp_path / "x.csv")
    assert iter(seen["rows"]) is seen["rows"]        # an iterator, consumed once
    assert not isinstance(seen["rows"], (list, tuple))


def test_failed_export_leaves_no_file(filled, tmp_path, monkeypatch):
    import basecrawler.reading.export as export

    def broken(columns, rows, binary):
        binary.write(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(export, "write_csv", broken)
    out_dir = tmp_path / "out"
    with pytest.raises(OSError):
        export_recalls(filled.db.conn, RecallFilter(), "csv", out_dir / "x.csv")
    assert list(out_dir.iterdir()) == []


def test_export_command_picks_format_from_extension(filled, db_path, tmp_path):
    out = tmp_path / "all.xlsx"
    assert main(["--db", db_path, "export", "-o", str(out), "--country", "US"]) == 0
    sheet = load_workbook(out).active
    assert sheet.max_row == 2


def test_export_command_to_stdout_as_jsonl(filled, db_path, capsysbinary):
    assert main(["--db", db_path, "export", "--format", "jsonl", "-o", "-", "--manufacturer", "ford"]) == 0
    out = capsysbinary.readouterr().out.decode("utf-8")
    assert sorted(json.loads(line)["recall_number"] for line in out.splitlines()) == ["2024-150", "24V-101"]


def test_export_limit_keeps_the_newest_records(filled, tmp_path):
    out = tmp_path / "newest.jsonl"
    assert export_recalls(filled.db.conn, RecallFilter(), "jsonl", out, limit=2) == 2
    assert [json.loads(line)["recall_number"] for line in out.read_text("utf-8").splitlines()] == ["JP-4980", "24V-101"]
