"""sources/hc.py: the Government of Canada Recalls & Safety Alerts file → product alerts
(fixtures in fixtures/hc/, expected counts written by hand in fixtures/hc/README.md)."""
import json
from collections import Counter
from pathlib import Path

import httpx
import pytest

from record_types.product_alert import ProductAlert
from sources.hc import FILE_PATH, HealthCanadaAlertsCrawler, recall_class, split_categories, tc_recall_number

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "fixtures" / "hc" / "HCRSAMOpenData.json"
# The shared samples sit beside the checkout (or beside the folder of work trees).
REAL_SAMPLE = next((p for p in (REPO.parent / "shared", REPO.parents[1] / "shared")
                    if (p / "real-samples" / "hc_HCRSAMOpenData_sample50.json").exists()),
                   REPO.parent / "shared") / "real-samples" / "hc_HCRSAMOpenData_sample50.json"


def serve(body: bytes, requested: list | None = None) -> httpx.MockTransport:
    def handler(request):
        if requested is not None:
            requested.append(request.url.path)
        if request.url.path != FILE_PATH:
            return httpx.Response(404)
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})
    return httpx.MockTransport(handler)


def crawler(store, settings, body: bytes | None = None, **kw):
    body = FIXTURE.read_bytes() if body is None else body
    return HealthCanadaAlertsCrawler(store, settings=settings, transport=serve(body), **kw)


def parsed_alerts(store, settings, body: bytes | None = None) -> dict[str, ProductAlert]:
    """fetch → parse → the type's model, as the pipeline does (parse level)."""
    source = crawler(store, settings, body)
    alerts = {}
    for raw in source.fetch_items():
        alert = ProductAlert.model_validate({"country": source.country, "source_lang": source.source_lang,
                                             **source.parse_raw(raw)})
        alerts[alert.alert_id] = alert
    return alerts


# ---- the category rule ------------------------------------------------------------------
@pytest.mark.parametrize("published,categories", [
    ("Food", ["Food"]),
    ("SUV - Car", ["SUV", "Car"]),
    ("Truck - Med. & H.D.", ["Truck - Med. & H.D."]),
    ("Candy, confectionary, snacks and sweeteners - Nuts, grains, and seeds",
     ["Candy, confectionary, snacks and sweeteners", "Nuts, grains, and seeds"]),
    ("General hospital and personal use - Chemistry - Microbiology",
     ["General hospital and personal use", "Chemistry", "Microbiology"]),
    ("Bus - Truck - Med. & H.D.", ["Bus", "Truck - Med. & H.D."]),
    ("Drugs - Drugs", ["Drugs"]),
    ("", []),
    (None, []),
])
def test_categories_split_on_the_separator_but_never_inside_a_single_category(published, categories):
    assert split_categories(published) == categories


def test_a_piece_of_abbreviations_only_qualifies_the_category_before_it():
    # Not in the known list: the shape ("Hvy. & Spec.") still says it is not a category alone.
    assert split_categories("Trailer - Hvy. & Spec.") == ["Trailer - Hvy. & Spec."]


@pytest.mark.parametrize("published,stored", [
    ("Class 1", "Class 1"), ("Type III", "Type III"), ("Type I - Type II", "Type I - Type II"),
    ("--", None), ("", None), (None, None),
])
def test_recall_class_is_kept_as_published_and_dashes_mean_none(published, stored):
    assert recall_class(published) == stored


def test_transport_canada_recall_number_comes_from_the_title_or_the_issue():
    assert tc_recall_number("Transport Canada Recall - 2017213 - EMERGENCY ONE", None, "TC") == "2017213"
    assert tc_recall_number("Brake hoses", "Transport Canada recall number: 2019385", "TC") == "2019385"
    assert tc_recall_number("Certain pies recalled (2025-11-30)", "Listeria", "CFIA") is None


# ---- the fixture file, read and parsed ---------------------------------------------------------
def test_every_alert_of_the_file_is_read_and_none_is_filtered(store, settings):
    alerts = parsed_alerts(store, settings)
    assert len(alerts) == 16
    assert len(json.loads(FIXTURE.read_bytes())) == 16


def test_zero_width_spaces_entities_and_glued_sentences_are_cleaned(store, settings):
    alerts = parsed_alerts(store, settings)
    first = alerts["90001"]
    assert first.title_original == "Maple Grove brand chicken pot pies recalled due to Listeria monocytogenes"
    assert first.what_to_do_original == ("Do not consume recalled products. Recalled products should be thrown out or "
                                         "returned to the location where they were purchased. Food contaminated with "
                                         "Listeria may not look or smell spoiled.")
    assert alerts["90005"].title_original.startswith("Ridgeway Tools & Garden")
    assert alerts["90003"].title_original == "Certain Trail Mix brand roasted almonds may contain Salmonella"
    every_text = " ".join(str(v) for a in alerts.values() for v in a.model_dump().values())
    assert "\u200b" not in every_text and "&nbsp;" not in every_text and "&amp;" not in every_text


def test_two_alerts_without_a_date_are_date_unknown_and_no_date_is_invented(store, settings):
    alerts = parsed_alerts(store, settings)
    undated = sorted(a.alert_id for a in alerts.values() if a.date_unknown)
    assert undated == ["90004", "90012"]          # "" and null in the file
    assert all(alerts[n].alert_date is None for n in undated)
    assert alerts["90011"].alert_date.isoformat() == "2026-06-26"


def test_category_and_organization_counts_are_the_fixture_counts(store, settings):
    alerts = parsed_alerts(store, settings).values()
    categories = Counter(c for a in alerts for c in a.category)
    assert categories["Food"] == 2 and categories["Drugs"] == 4 and categories["Medical devices"] == 1
    assert categories["Nuts, grains, and seeds"] == 1 and categories["Truck - Med. & H.D."] == 1
    assert categories["Car"] == 1 and categories["SUV"] == 1
    authorities = Counter(a.authority for a in alerts)
    assert authorities == {"CFIA": 4, "Consumer product safety": 2, "Medical devices": 2,
                           "Drugs and health products": 2, "TC": 2, "Controlled substances and cannabis": 1,
                           "Communications and Public Affairs Branch": 1, "HC": 1, "Marketed health products": 1}
    risk = Counter(a.risk_class for a in alerts)
    assert risk == {None: 7, "Class 1": 2, "Type II": 2, "Class 2": 1, "Class 3": 1, "Type I": 1, "Type III": 1,
                    "Type I - Type II": 1}


def test_archived_is_kept(store, settings):
    alerts = parsed_alerts(store, settings)
    assert sorted(a.alert_id for a in alerts.values() if a.archived) == ["90003", "90006", "90014", "90015", "90016"]


def test_transport_canada_alerts_carry_the_recall_number_other_sources_use(store, settings):
    alerts = parsed_alerts(store, settings)
    assert alerts["90011"].recall_number == "2024301"      # the ca fixture's FORD recall
    assert alerts["90012"].recall_number == "2023512"
    assert alerts["90012"].title_original == "Transport Canada Recall - 2023512"
    assert {a.alert_id for a in alerts.values() if a.recall_number} == {"90011", "90012"}


def test_a_body_that_is_not_a_json_array_is_unexpected_content(store, settings):
    from basecrawler.errors import UnexpectedContent

    with pytest.raises(UnexpectedContent, match="not a JSON array"):
        list(crawler(store, settings, b"<!DOCTYPE html><html>maintenance</html>").fetch_items())


def test_a_file_cut_short_keeps_the_alerts_read_before_the_break(store, settings):
    from basecrawler.errors import UnexpectedContent

    body = FIXTURE.read_bytes()
    cut = body[:body.index(b'{"NID": "90004"')] + b'{"NID": "9'
    read = []
    with pytest.raises(UnexpectedContent, match="breaks after 3 records"):
        for item in crawler(store, settings, cut).fetch_items():
            read.append(item["NID"])
    assert read == ["90001", "90002", "90003"]


# ---- the real published sample -------------------------------------------------------------------
@pytest.mark.skipif(not REAL_SAMPLE.exists(), reason="real samples folder absent")
def test_real_sample_every_record_parses_with_its_shape(store, settings):
    alerts = parsed_alerts(store, settings, REAL_SAMPLE.read_bytes())
    raw = json.loads(REAL_SAMPLE.read_bytes())
    assert len(alerts) == len(raw) == 50
    assert sum(a.date_unknown for a in alerts.values()) == sum(1 for r in raw if not r.get("Last updated"))
    assert ["Truck - Med. & H.D."] in [a.category for a in alerts.values()]
    tc = [r for r in raw if r["Organization"] == "TC"]
    assert all(alerts[r["NID"]].recall_number for r in tc)


# ---- end to end: run, re-run, filters, export (the generic store) -------------------------------
@pytest.fixture
def hc_site(monkeypatch):
    from basecrawler.testing import LoopbackServer, Reply

    body = FIXTURE.read_bytes()

    def handler(request):
        if request.path == FILE_PATH:
            return Reply(200, body, {"Content-Type": "application/json"})
        return Reply(404, b"")
    with LoopbackServer(handler) as server:
        monkeypatch.setenv("BASECRAWLER_HC_DATA_URL", server.url)
        yield server


def cli(capsys, *argv) -> tuple[int, str]:
    from basecrawler.cli import main

    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def stored(db_path, where="1=1") -> list[dict]:
    import sqlite3

    connection = sqlite3.connect(db_path)
    connection.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in connection.execute(f"SELECT * FROM product_alerts WHERE source = 'hc' AND {where}")]
    finally:
        connection.close()


def test_cli_run_stores_every_alert_once_and_a_rerun_writes_nothing(hc_site, db_path, capsys):
    code, out = cli(capsys, "--db", db_path, "run", "--source", "hc", "--mode", "full")
    assert code == 0, out
    assert "hc: fetched 16 → parsed 16 → out of range 0 → saved 16 (new 16, updated 0, unchanged 0)" in out
    assert len(stored(db_path)) == 16
    code, out = cli(capsys, "--db", db_path, "run", "--source", "hc")          # incremental: the same file
    assert code == 0, out
    assert "saved 16 (new 0, updated 0, unchanged 16)" in out and "out of range 0" in out


def test_two_alerts_without_a_date_are_stored_counted_and_searchable(hc_site, db_path, capsys):
    cli(capsys, "--db", db_path, "run", "--source", "hc", "--mode", "full")
    undated = stored(db_path, "date_unknown = 1")
    assert sorted(r["alert_id"] for r in undated) == ["90004", "90012"]
    assert all(r["alert_date"] is None for r in undated)                 # never invented
    code, out = cli(capsys, "--db", db_path, "search", "--type", "product_alert", "--json", "Creamery")
    assert [r["alert_id"] for r in json.loads(out)] == ["90004"]


@pytest.mark.parametrize("facet,value,count", [
    ("category", "Food", 2), ("category", "Drugs", 4), ("category", "Medical devices", 1),
    ("category", "Nuts, grains, and seeds", 1), ("category", "Truck - Med. & H.D.", 1), ("category", "Car", 1),
    ("authority", "CFIA", 4), ("authority", "TC", 2), ("authority", "Medical devices", 2),
    ("authority", "Consumer product safety", 2), ("risk_class", "Class 1", 2), ("risk_class", "Type I - Type II", 1),
])
def test_facet_filters_return_the_fixture_counts(hc_site, db_path, capsys, facet, value, count):
    cli(capsys, "--db", db_path, "run", "--source", "hc", "--mode", "full")
    code, out = cli(capsys, "--db", db_path, "search", "--type", "product_alert", "--source", "hc", "--json",
                    "--limit", "100", "--filter", f"{facet}={value}")
    assert code == 0, out
    assert len(json.loads(out)) == count


def test_export_food_alerts_to_csv(hc_site, db_path, tmp_path, capsys):
    import csv

    cli(capsys, "--db", db_path, "run", "--source", "hc", "--mode", "full")
    target = tmp_path / "food.csv"
    code, out = cli(capsys, "--db", db_path, "export", "--type", "product_alert", "--source", "hc",
                    "--filter", "category=Food", "-o", str(target))
    assert code == 0, out
    with open(target, encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert sorted(r["alert_id"] for r in rows) == ["90001", "90002"]
    assert json.loads(rows[0]["category"]) == ["Food"]


def test_a_transport_canada_alert_and_the_ca_vehicle_recall_are_two_records_with_one_number(hc_site, db_path,
                                                                                           capsys, monkeypatch):
    from basecrawler.testing import LoopbackServer, Reply

    ca_csv = (REPO / "fixtures" / "ca" / "vrdb_full_monthly.csv").read_bytes()
    with LoopbackServer(lambda request: Reply(200, ca_csv, {"Content-Type": "text/csv"})) as ca_site:
        monkeypatch.setenv("BASECRAWLER_CA_DATA_URL", ca_site.url)
        assert cli(capsys, "--db", db_path, "run", "--source", "ca", "--mode", "full")[0] == 0
    assert cli(capsys, "--db", db_path, "run", "--source", "hc", "--mode", "full")[0] == 0
    import sqlite3

    connection = sqlite3.connect(db_path)
    vehicle = connection.execute("SELECT source, manufacturer_original FROM recalls "
                                 "WHERE country = 'CA' AND recall_number = '2024301'").fetchall()
    alert = connection.execute("SELECT source, alert_id FROM product_alerts "
                               "WHERE country = 'CA' AND recall_number = '2024301'").fetchall()
    connection.close()
    assert vehicle == [("ca", "FORD")] and alert == [("hc", "90011")]
    from basecrawler import Store

    store = Store(db_path)
    try:
        [row] = store.query("SELECT * FROM product_alerts WHERE alert_id = '90011'")
        linked = store.lookup.same_as("product_alert", row)
    finally:
        store.close()
    assert [(r["record_type"], r["source"], r["recall_number"]) for r in linked] == \
        [("vehicle_recall", "ca", "2024301")]


def test_offline_replay_set_serves_hc(db_path, capsys):
    code, out = cli(capsys, "--db", db_path, "run", "--source", "hc", "--mode", "full",
                    "--replay", str(REPO / "fixtures" / "replay"))
    assert code == 0, out
    assert len(stored(db_path)) == 16
