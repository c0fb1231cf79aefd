"""sources/uk.py: DVSA RecallsFile.csv → vehicle recalls, one per recall number with its models
and VIN ranges (fixture in fixtures/uk/, made by make_fixtures.py; no real sample exists)."""
import csv
import datetime as dt
import io
import json
from pathlib import Path

import httpx
import pytest

from basecrawler.testing import fast_settings
from sources.uk import FILE_PATH, UkDvsaCrawler, uk_date

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "fixtures" / "uk" / "RecallsFile.csv"


def serve(body: bytes, content_type="text/csv") -> httpx.MockTransport:
    def handler(request):
        if request.url.path != FILE_PATH:
            return httpx.Response(404)
        return httpx.Response(200, content=body, headers={"content-type": content_type})
    return httpx.MockTransport(handler)


def run(db_path, body: bytes):
    crawler = UkDvsaCrawler(db_path, mode="full", settings=fast_settings(db_path), transport=serve(body))
    return crawler, crawler.run()


def recalls(crawler) -> dict:
    rows = crawler.store.query("SELECT * FROM recalls WHERE source = 'uk' ORDER BY id")
    return {row["recall_number"]: {**row, "extra": json.loads(row["extra"] or "{}")} for row in rows}


@pytest.mark.parametrize("text, date", [
    ("03/06/2024", dt.date(2024, 6, 3)), ("03/06/2024.", dt.date(2024, 6, 3)), (" 12/07/2024. ", dt.date(2024, 7, 12)),
    ("TBC", None), ("", None), (None, None),
])
def test_launch_dates_are_day_first_and_a_trailing_dot_is_dropped(text, date):
    assert uk_date(text) == date


def test_rows_of_one_recall_are_one_record_with_every_model_and_vin_range(db_path):
    crawler, result = run(db_path, FIXTURE.read_bytes())
    c = result.counts
    assert result.status == "succeeded"
    assert (c.fetched, c.parsed, c.new, c.unparseable, c.dead_lettered) == (5, 4, 4, 1, 1)
    stored = recalls(crawler)
    assert sorted(stored) == ["R/2022/007", "R/2023/050", "R/2024/101", "R/2024/102"]
    ford = stored["R/2024/101"]
    assert ford["country"] == "GB" and ford["recall_date"] == "2024-06-03"
    assert ford["manufacturer_original"] == "FORD" and ford["model_original"] == "FOCUS, KUGA"
    assert ford["summary_original"] == "FRONT SUSPENSION"
    assert ford["defect_cause_original"].startswith("The front lower arm may fracture")
    assert ford["remedy_original"] == "Replace the front lower arms on both sides."
    assert ford["affected_units"] == 1520   # the count repeated on its rows, taken once
    vehicles = ford["extra"]["vehicles"]
    assert [(v["model"], v["vin_start"], v["vin_end"]) for v in vehicles] == [
        ("FOCUS", "WF0NXXGCHNPA00001", "WF0NXXGCHNPA09999"), ("KUGA", "WF0AXXWPMAPA00001", "WF0AXXWPMAPA04999"),
        ("FOCUS", "WF0NXXGCHNPB00001", "WF0NXXGCHNPB02000")]   # the row further down the file too
    assert vehicles[0]["build_start"] == "2022-01-01" and vehicles[0]["build_end"] == "2023-06-30"
    assert ford["extra"]["manufacturer_ref"] == "24S12"


def test_windows_1252_text_is_read_as_such_with_a_warning(db_path):
    crawler, result = run(db_path, FIXTURE.read_bytes())
    citroen = recalls(crawler)["R/2024/102"]
    assert citroen["manufacturer_original"] == "CITROËN"
    assert citroen["defect_cause_original"] == "Brake hose may chafe – fluid loss at 40°C."
    assert any("Windows-1252" in warning for warning in result.warnings)


def test_a_revised_count_takes_the_largest_and_keeps_both(db_path):
    crawler, _ = run(db_path, FIXTURE.read_bytes())
    vauxhall = recalls(crawler)["R/2023/050"]
    assert vauxhall["affected_units"] == 125 and vauxhall["extra"]["units_reported"] == ["120", "125"]
    assert vauxhall["model_original"] == "CORSA, CORSA-E"


def test_an_unreadable_launch_date_keeps_the_recall_with_its_date_unknown(db_path):
    crawler, _ = run(db_path, FIXTURE.read_bytes())
    honda = recalls(crawler)["R/2022/007"]
    assert honda["date_unknown"] == 1 and honda["extra"]["launch_date_published"] == "TBC"


def test_a_utf8_file_reads_without_a_warning(db_path):
    text = FIXTURE.read_bytes().decode("cp1252")
    crawler, result = run(db_path, text.encode("utf-8"))
    assert recalls(crawler)["R/2024/102"]["manufacturer_original"] == "CITROËN"
    assert not any("Windows-1252" in warning for warning in result.warnings)


def test_a_file_without_the_recall_columns_is_refused_whole(db_path):
    crawler, result = run(db_path, b"<html><body>Service unavailable</body></html>\n")
    assert result.status == "failed" and "lacks" in result.error
    assert result.counts.new == 0


def test_a_thousand_scattered_rows_group_into_their_recalls(db_path):
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["Launch Date", "Recalls Number", "Make", "Model", "Vehicle Numbers", "VIN Start", "VIN End"])
    for n in range(1000):
        writer.writerow(["01/02/2024", f"R/2024/{n % 50:03d}", "MAKE", f"MODEL{n % 7}", "10", f"V{n:05d}", f"W{n:05d}"])
    crawler, result = run(db_path, out.getvalue().encode())
    assert (result.counts.fetched, result.counts.new) == (50, 50)
    stored = recalls(crawler)
    assert all(len(row["extra"]["vehicles"]) == 20 for row in stored.values())
