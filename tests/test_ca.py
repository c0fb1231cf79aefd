"""sources/ca.py: Transport Canada CSV grouped into recalls (fixtures in fixtures/ca/)."""
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from sources.ca import CanadaCrawler, clean_text

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "ca"
HEADER = (FIXTURES / "vrdb_full_monthly.csv").read_bytes().split(b"\n", 1)[0] + b"\n"


def serve(body: bytes, requested: list | None = None) -> httpx.MockTransport:
    def handler(request):
        if requested is not None:
            requested.append(request.url.path)
        return httpx.Response(200, content=body, headers={"content-type": "text/csv"})
    return httpx.MockTransport(handler)


def run_full(store, settings, body: bytes | None = None, mode="full"):
    body = body if body is not None else (FIXTURES / "vrdb_full_monthly.csv").read_bytes()
    return CanadaCrawler(store, settings=settings, transport=serve(body), mode=mode).run()


def extra(row) -> dict:
    return row["extra"] if isinstance(row["extra"], dict) else json.loads(row["extra"] or "{}")


def csv_row(number, model="CIVIC", year="2020", units="100.00", date="2020-01-15",
            system_fr="Freins", comment="Dealers will fix it.") -> bytes:
    cells = [number, year, "", "Passenger Car", "Voiture de tourisme", "HONDA", model, units, "Brakes",
             system_fr, "Safety Mfr", "Sécurité - fabricant", comment, "Les concessionnaires répareront.", date]
    return (",".join('"' + c.replace('"', '""') + '"' for c in cells) + "\n").encode("utf-8")


def test_three_rows_of_one_recall_become_one_record_with_three_models(store, settings):
    result = run_full(store, settings)
    assert result.status == "succeeded"
    row = store.lookup.get("vehicle_recall", {"country": "CA", "recall_number": "2019385"})
    assert row["model_original"] == "SILVERADO 1500, SIERRA 1500, SILVERADO 1500 LD"
    assert row["manufacturer_original"] == "CHEVROLET, GMC"
    assert row["model_year"] == "2019-2020"
    assert len(extra(row)["vehicles"]) == 3
    assert store.query("SELECT COUNT(*) AS n FROM recalls WHERE recall_number = '2019385'")[0]["n"] == 1


def test_unit_count_repeated_on_every_row_is_taken_once(store, settings):
    run_full(store, settings)
    assert store.lookup.get("vehicle_recall", {"country": "CA", "recall_number": "2019385"})["affected_units"] == 2700   # 3 rows of "2,700.00", not 8100


def test_disagreeing_unit_counts_use_the_largest_and_keep_all(store, settings):
    body = HEADER + csv_row("2020001", model="CIVIC", units="1,200.00") + csv_row("2020001", model="ACCORD", units="1,250.00")
    run_full(store, settings, body)
    row = store.lookup.get("vehicle_recall", {"country": "CA", "recall_number": "2020001"})
    assert row["affected_units"] == 1250
    assert extra(row)["units_reported"] == [1200, 1250]


def test_quoted_multi_line_comment_parses_and_splits_into_sections(store, settings):
    run_full(store, settings)
    row = store.lookup.get("vehicle_recall", {"country": "CA", "recall_number": "2019385"})
    assert row["summary_original"].startswith("Issue: On certain trucks, the bolt that attaches the steering gear")
    assert "\nSafety Risk:" in row["summary_original"]
    assert row["defect_cause_original"] == ("On certain trucks, the bolt that attaches the steering gear to the frame, "
                                            "the tie rod and the intermediate shaft, may not have been tightened properly.")
    assert row["consequence_original"] == "A loose bolt could cause a loss of steering control, increasing the risk of a crash."
    assert row["remedy_original"].startswith("GM will notify owners by mail, and advise them")
    assert row["component_original"] == "Steering"


def test_a_heading_in_unicode_letters_keeps_the_recall_and_its_sections(store, settings):
    """re.IGNORECASE matches "İssue" and "Actionſ"; their lowered text named no heading, and the
    recall was a parse dead letter."""
    comment = "\u0130SSUE: The hose may crack.\nSafety Risk: A leak.\nCorrective Action\u017f: Replace it."
    result = run_full(store, settings, HEADER + csv_row("2020077", comment=comment))
    assert (result.counts.new, result.counts.dead_lettered) == (1, 0)
    row = store.lookup.get("vehicle_recall", {"country": "CA", "recall_number": "2020077"})
    assert (row["defect_cause_original"], row["consequence_original"], row["remedy_original"]) == \
        ("The hose may crack.", "A leak.", "Replace it.")


def test_embedded_double_quotes_survive(store, settings):
    run_full(store, settings)
    assert '"QUAD" BUCKET SEATS' in store.lookup.get("vehicle_recall", {"country": "CA", "recall_number": "1997118"})["summary_original"]


def test_row_with_broken_date_is_stored_as_date_unknown(store, settings):
    result = run_full(store, settings)
    row = store.lookup.get("vehicle_recall", {"country": "CA", "recall_number": "2008217"})
    assert row is not None and row["date_unknown"] == 1 and row["recall_date"] == "1970-01-01"
    assert extra(row)["unparsed_recall_date"] == "2008-02-30"
    assert result.counts.dead_lettered == 0


def test_french_text_is_kept_in_extra(store, settings):
    run_full(store, settings)
    french = extra(store.lookup.get("vehicle_recall", {"country": "CA", "recall_number": "2019385"}))["fr"]
    assert french["system_type"] == "Direction"
    assert french["notification_type"] == "Sécurité - fabricant"
    assert french["comment"].startswith("Problème : Sur certains camions, le boulon qui fixe le boîtier")


def test_translation_not_available_is_treated_as_absent(store, settings):
    run_full(store, settings)
    row = store.lookup.get("vehicle_recall", {"country": "CA", "recall_number": "1989045"})
    assert "Translation not available" not in json.dumps(row, ensure_ascii=False)
    assert extra(row)["fr"] == {"category": "Voiture de tourisme"}


def test_mojibake_is_repaired(store, settings):
    run_full(store, settings)
    french = extra(store.lookup.get("vehicle_recall", {"country": "CA", "recall_number": "2015072"}))["fr"]
    assert french["system_type"] == "Sièges et dispositifs de retenue"
    assert french["notification_type"] == "Sécurité - fabricant"
    assert french["comment"].startswith("Problème : Sur certains véhicules, le prétendeur")


def test_bytes_that_are_not_utf8_are_read_as_windows_1252(store, settings, caplog):
    body = HEADER + csv_row("2020002").replace("Freins".encode(), "Syst\xe8me de freinage".encode("cp1252"))
    result = run_full(store, settings, body)
    assert result.counts.saved == 1
    assert extra(store.lookup.get("vehicle_recall", {"country": "CA", "recall_number": "2020002"}))["fr"]["system_type"] == "Système de freinage"
    assert "not UTF-8" in caplog.text


def test_garbled_text_that_cannot_be_repaired_is_kept_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="sources.ca"):
        assert clean_text("Si\ufffd\ufffdges et dispositifs", "2020003", "SYSTEM_TYPE_FTXT") == "Si\ufffd\ufffdges et dispositifs"
    assert "cannot be repaired" in caplog.text and "2020003" in caplog.text


def test_rows_of_one_recall_split_across_the_file_make_one_complete_record(store, settings):
    result = run_full(store, settings)
    row = store.lookup.get("vehicle_recall", {"country": "CA", "recall_number": "2012099"})
    assert row["model_original"] == "MAZDA3, MAZDA5" and row["model_year"] == "2011-2012"
    assert result.counts.fetched == 9 and result.counts.new == 9 and result.counts.updated == 0


def test_incremental_run_reads_the_60_day_file_and_full_run_the_full_file(store, settings):
    requested = []
    body = (FIXTURES / "vrdb_60days_daily.csv").read_bytes()
    CanadaCrawler(store, settings=settings, transport=serve(body, requested)).run()
    CanadaCrawler(store, settings=settings, transport=serve(body, requested), mode="full").run()
    assert requested == ["/vrdb_60days_daily.csv", "/vrdb_full_monthly.csv"]


def test_downloaded_csv_temp_file_is_removed_after_the_run(store, settings):
    run_full(store, settings)
    assert list(Path(settings.db_path).parent.rglob("*.part")) == []


@pytest.mark.parametrize("mode, expected", [("incremental", 3), ("full", 9)])
def test_replay_run_works_offline_via_the_cli(tmp_path, mode, expected):
    db = tmp_path / "replay.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BASECRAWLER_")}
    proc = subprocess.run(
        [sys.executable, "-m", "basecrawler", "--db", str(db), "run", "--source", "ca", "--mode", mode,
         "--replay", "fixtures/replay"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"ca: fetched {expected} → parsed {expected}" in proc.stderr
    import sqlite3
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM recalls WHERE country = 'CA'").fetchone()[0] == expected
