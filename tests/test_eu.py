"""EU Safety Gate source: index → weekly reports → vehicle notifications → recalls."""
import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from lxml import etree

from basecrawler.testing import LoopbackServer, Reply
from sources.eu import (VEHICLE_CATEGORY_EXAMPLES, EuSafetyGateCrawler, WeeklyReport, clean_text,
                        is_vehicle_category, report_id_from_url, report_request_path, split_danger, split_measures)

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "eu"
REAL_SAMPLES = next((p / "real-samples" for p in (REPO.parent / "shared", REPO.parents[1] / "shared")
                     if (p / "real-samples").is_dir()), REPO.parent / "shared" / "real-samples")
INDEX_PATH = "/safety-gate-alerts/api/download/weeklyReport/list/xml/en"
REPORT_PATH = "/safety-gate-alerts/api/download/weeklyReport/detail/xml/"


@pytest.fixture(autouse=True)
def _fast_eu(_clean_env, monkeypatch):
    # The source is polite (1 request/s); tests need no politeness.
    monkeypatch.setenv("BASECRAWLER_EU_RATE", "1000")


def index_xml(*entries):
    """entries: (report_id, DD/MM/YYYY, url suffix)."""
    items = "".join(
        f"<weeklyReport><reference>Report-{i}</reference><publicationDate>{date}</publicationDate>"
        f"<URL>https://ec.europa.eu{REPORT_PATH}{rid}?language=en{suffix}</URL></weeklyReport>"
        for i, (rid, date, suffix) in enumerate(entries))
    return f'<?xml version="1.0" encoding="UTF-8"?><Safety-Gate>{items}</Safety-Gate>'.encode()


class Site:
    """MockTransport for ec.europa.eu serving an index and reports by id; keeps every request."""

    def __init__(self, index: bytes, reports: dict):
        self.index, self.reports, self.requests = index, reports, []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        if path == INDEX_PATH:
            return httpx.Response(200, content=self.index, headers={"content-type": "application/xml"})
        if path.startswith(REPORT_PATH):
            body = self.reports.get(path[len(REPORT_PATH):])
            if callable(body):
                return body(request)
            if body is not None:
                return httpx.Response(200, content=body, headers={"content-type": "application/xml"})
        return httpx.Response(404, content=b"not found")

    def report_ids_requested(self):
        return sorted(r.url.path[len(REPORT_PATH):] for r in self.requests if r.url.path.startswith(REPORT_PATH))


def fixture_site():
    reports = {rid: (FIXTURES / name).read_bytes() for rid, name in [
        ("15", "report_15_legacy.xml"), ("10000201", "report_10000201.xml"),
        ("10000204", "report_10000204.xml"), ("10000205", "report_10000205.xml")]}
    return Site((FIXTURES / "index.xml").read_bytes(), reports)


def crawl(store, settings, site, **kw):
    kw.setdefault("mode", "full")
    return EuSafetyGateCrawler(store, settings=settings, transport=httpx.MockTransport(site), **kw).run()


def extra(row):
    return row["extra"] if isinstance(row["extra"], dict) else json.loads(row["extra"] or "{}")


# ---- real published reports --------------------------------------------------------------
REAL_REPORTS = sorted(REAL_SAMPLES.glob("eu_report_*.xml.gz")) if REAL_SAMPLES.is_dir() else []


@pytest.mark.skipif(not REAL_REPORTS, reason="real samples folder absent")
@pytest.mark.parametrize("path", REAL_REPORTS, ids=lambda p: p.name)
def test_real_report_parses_without_dead_letters_and_every_kept_alert_is_dated(store, settings, path):
    body = gzip.decompress(path.read_bytes())
    root = etree.fromstring(body)
    vehicle_cases = {n.findtext("caseNumber") for n in root.iter("notifications")
                     if is_vehicle_category(n.findtext("category"))}
    report_date = root.findtext("report_date")
    site = Site(index_xml(("777", report_date, "")), {"777": body})

    result = crawl(store, settings, site)

    assert result.status == "succeeded"
    assert store.dead_letters.open_dead_letters("eu") == []
    rows = store.query("SELECT * FROM recalls WHERE source = 'eu'")
    assert vehicle_cases and {r["recall_number"] for r in rows} == vehicle_cases
    day, month, year = report_date.split("/")
    for row in rows:
        assert row["recall_number"] and row["date_unknown"] == 0
        assert row["recall_date"] == f"{year}-{month}-{day}"


# ---- the vehicle filter ---------------------------------------------------------------------
@pytest.mark.parametrize("category,kept", sorted(VEHICLE_CATEGORY_EXAMPLES.items()))
def test_vehicle_category_table(category, kept):
    assert is_vehicle_category(category) is kept


def test_category_table_covers_the_issue_examples():
    for category in ("Motor vehicles", "Other - Car floor mats", "Other - Tyres", "Other - Automotive accessories"):
        assert VEHICLE_CATEGORY_EXAMPLES[category] is True
    for category in ("Childcare articles and children's equipment", "Other - Baby carrier", "Toys"):
        assert VEHICLE_CATEGORY_EXAMPLES[category] is False


def test_only_vehicle_notifications_are_stored(store, settings):
    crawl(store, settings, fixture_site())
    numbers = {r["recall_number"] for r in store.query("SELECT recall_number FROM recalls")}
    assert numbers == {"0061/05", "0063/05", "SR/01901/26", "SR/01907/26", "SR/02101/26", "SR/02109/26",
                       "SR/02140/26"}


# ---- clean-ups and mapping ----------------------------------------------------------------------
def test_html_in_brand_and_model_is_cleaned(store, settings):
    crawl(store, settings, fixture_site())
    row = store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/01901/26"})
    assert row["manufacturer_original"] == "Volkswagen"
    assert row["model_original"] == "Golf (e1*2018/858*00012*01 (CD1))"


def test_null_prefix_is_removed(store, settings):
    crawl(store, settings, fixture_site())
    row = store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "0061/05"})
    assert row["consequence_original"] == "Risk of fire."
    assert row["defect_cause_original"].startswith("A fuel feed hose")
    assert clean_text("null null Risk of injury.") == "Risk of injury."


def test_unknown_nil_and_empty_values_are_absent(store, settings):
    crawl(store, settings, fixture_site())
    tyre = store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/01907/26"})
    assert tyre["manufacturer_original"] is None           # <brand>Unknown</brand>
    assert "countryOfOrigin" not in extra(tyre)             # Unknown
    assert extra(tyre)["barcode"] == "5900000000019"
    legacy = extra(store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "0061/05"}))
    assert "barcode" not in legacy and "batchNumber" not in legacy and "type_numberOfModel" not in legacy


def test_element_marked_xsi_nil_is_absent_whatever_it_holds():
    from sources.eu_text import element_value
    element = etree.fromstring('<brand xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
                               'xsi:nil="true">placeholder</brand>')
    assert element_value(element) is None


def test_legacy_alert_takes_brand_and_model_from_its_description(store, settings):
    crawl(store, settings, fixture_site())
    row = store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "0061/05"})
    assert (row["manufacturer_original"], row["model_original"]) == ("Meridian", "Tourer 2.0 (M 75)")
    assert extra(row)["names_from_description"] is True


def test_mapping_of_a_modern_alert(store, settings):
    crawl(store, settings, fixture_site())
    row = store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/01901/26"})
    assert row["recall_date"] == "2026-07-24" and row["country"] == "EU" and row["source_lang"] == "en"
    assert row["source_url"] == "https://ec.europa.eu/safety-gate-alerts/screen/webReport/alertDetail/10200101"
    assert row["summary_original"] is None   # "Passenger car." only named the product (extra.product)
    assert row["defect_cause_original"] == "The rear seat belt buckle may not latch correctly."
    assert row["consequence_original"].startswith("In the event of an accident")
    data = extra(row)
    assert data["notifyingCountry"] == "Germany" and data["level"] == "Serious risk"
    assert data["riskType"] == "Injuries" and data["category"] == "Motor vehicles"
    assert data["product"] == "Passenger car" and data["companyRecallCode"] == "69QR"
    assert len(data["pictures"]) == 2 and data["compliance"].startswith("The product does not comply")


def test_run_together_measures_become_sentences_with_entry_into_force(store, settings):
    crawl(store, settings, fixture_site())
    row = store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/01901/26"})
    assert row["remedy_original"] == (
        "Recall of the product from end users (by the manufacturer), in force from 02/07/2026.\n"
        "Withdrawal of the product from the market (ordered to the distributor), in force from 24/04/2026.")
    data = extra(row)
    assert [m["entry_into_force"] for m in data["measures"]] == ["2026-07-02", "2026-04-24"]
    assert data["entry_into_force"] == "2026-04-24"


def test_measures_with_unknown_date_and_legacy_full_stops():
    measures = split_measures("Type of economic operator taking notified measure(s): OtherCategory of "
                              "measure(s): Voluntary withdrawal from distribution.Date of entry into force: Unknown")
    assert measures == [{"operator": "Other", "ordered": False, "measure": "Voluntary withdrawal from distribution",
                         "entry_into_force": None}]


def test_danger_splits_into_cause_consequence_and_compliance():
    parts = split_danger("Cracks in the fuel line could lead to a fuel leak. If the fuel reaches hot parts, it "
                         "could ignite. The product does not comply with the Regulation.")
    assert parts == {"defect_cause": "Cracks in the fuel line could lead to a fuel leak.",
                     "consequence": "If the fuel reaches hot parts, it could ignite.",
                     "compliance": "The product does not comply with the Regulation."}


def test_addendum_duplicate_becomes_one_row_keeping_first_date(store, settings):
    result = crawl(store, settings, fixture_site())
    rows = store.query("SELECT * FROM recalls WHERE recall_number = 'SR/02101/26'")
    assert len(rows) == 1
    assert rows[0]["recall_date"] == "2026-08-14"                 # first published in week 33
    assert extra(rows[0])["companyRecallCode"] == "KM-2607"      # the addendum's addition is kept
    assert result.counts.dead_lettered == 0


def test_addendum_in_a_later_run_keeps_the_stored_date(store, settings):
    site = fixture_site()
    crawl(store, settings, site, since="2026-08-01", until="2026-08-15")
    crawl(store, settings, fixture_site(), since="2026-08-16")
    row = store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/02101/26"})
    assert row["recall_date"] == "2026-08-14"
    assert extra(row)["companyRecallCode"] == "KM-2607"



def test_a_non_vehicle_alert_repeated_in_a_later_run_keeps_its_stored_date(store, settings):
    # The week-34 addendum repeats the week-33 hoodie (a clothing alert: no vehicle recall).
    week33 = (FIXTURES / "report_10000204.xml").read_text(encoding="utf-8")
    start = week33.rindex("<notifications", 0, week33.index("SR/02110/26"))
    hoodie = week33[start:week33.index("</notifications>", start) + len("</notifications>")]
    site = fixture_site()
    site.reports["10000205"] = site.reports["10000205"].replace(b"</Safety-Gate>", hoodie.encode() + b"</Safety-Gate>")
    crawl(store, settings, site, since="2026-08-01", until="2026-08-15")
    crawl(store, settings, site, since="2026-08-16")
    assert "10000205" in site.report_ids_requested()
    row = store.lookup.get("product_alert", {"source": "eu", "country": "EU", "alert_id": "SR/02110/26"})
    assert row["alert_date"] == "2026-08-14"

def test_notification_without_case_number_is_its_own_dead_letter(store, settings):
    body = (FIXTURES / "report_10000204.xml").read_bytes().replace(
        b"<caseNumber>SR/02109/26</caseNumber>", b"<caseNumber/>")
    site = Site(index_xml(("10000204", "14/08/2026", "")), {"10000204": body})
    result = crawl(store, settings, site)
    assert result.counts.dead_lettered == 1
    assert store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/02101/26"}) is not None
    letter = store.dead_letters.open_dead_letters("eu")[0]
    assert "caseNumber" in letter["error"] and "VoltMax" in letter["raw"]


# ---- which reports, which URL ----------------------------------------------------------------
def test_stray_comma_in_index_url_is_not_requested(store, settings):
    site = Site(index_xml(("10000201", "24/07/2026", ", ")),
                {"10000201": (FIXTURES / "report_10000201.xml").read_bytes()})
    crawl(store, settings, site)
    report_requests = [r for r in site.requests if r.url.path.startswith(REPORT_PATH)]
    assert [str(r.url) for r in report_requests] == [f"https://ec.europa.eu{REPORT_PATH}10000201?language=en"]
    assert store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/01901/26"}) is not None


def test_index_url_without_detail_path_gets_the_canonical_report_url():
    url = "https://ec.europa.eu/safety-gate-alerts/screen/webReport/weeklyReports/report/10000320"
    report = WeeklyReport("Report-2026-35", None, 2026, 35, url, report_id_from_url(url))
    assert report_request_path(report) == f"{REPORT_PATH}10000320?language=en"


def test_index_cannot_send_requests_to_another_host(store, settings):
    index = index_xml(("10000201", "24/07/2026", "")).replace(b"https://ec.europa.eu", b"http://attacker.example")
    site = Site(index, {"10000201": (FIXTURES / "report_10000201.xml").read_bytes()})
    crawl(store, settings, site)
    assert {r.url.host for r in site.requests} == {"ec.europa.eu"}
    assert store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/01901/26"}) is not None


def test_report_answering_400_is_retried_with_search_parameter(store, settings):
    body = (FIXTURES / "report_10000201.xml").read_bytes()

    def needs_search(request):
        if request.url.params.get("search") != "WEB_REPORT|:|10000201":
            return httpx.Response(400, content=b"Bad Request")
        return httpx.Response(200, content=body, headers={"content-type": "application/xml"})

    site = Site(index_xml(("10000201", "24/07/2026", "")), {"10000201": needs_search})
    result = crawl(store, settings, site)
    assert result.counts.dead_lettered == 0
    assert store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/01901/26"}) is not None


def test_incremental_run_fetches_only_reports_published_since_window(store, settings):
    EuSafetyGateCrawler(store, settings=settings, transport=httpx.MockTransport(fixture_site()),
                        since="2026-08-14", until="2026-08-14").run()   # newest stored: 2026-08-14
    site = fixture_site()
    crawler = EuSafetyGateCrawler(store, settings=settings, transport=httpx.MockTransport(site))
    result = crawler.run()
    assert str(crawler.since) == "2026-07-31"                   # 14 days of overlap
    assert site.report_ids_requested() == ["10000204", "10000205"]
    assert result.status == "succeeded" and store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/02140/26"}) is not None


def test_full_run_reads_every_report_in_the_index(store, settings):
    site = fixture_site()
    crawl(store, settings, site)
    assert site.report_ids_requested() == ["10000201", "10000204", "10000205", "15"]


def test_full_run_over_replay_set_via_cli(tmp_path):
    db = tmp_path / "cli.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BASECRAWLER_")}
    env["BASECRAWLER_EU_RATE"] = "1000"
    done = subprocess.run(
        [sys.executable, "-m", "basecrawler", "--db", str(db), "run", "--source", "eu", "--mode", "full",
         "--replay", str(REPO / "fixtures" / "replay")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # 13 notifications: 13 product alerts and 8 vehicle recalls; the addendum repeats one of each.
    assert ("eu: fetched 13 → parsed 21 → out of range 0 → saved 19 (new 19, updated 0, unchanged 0) → merged 2"
            in done.stderr + done.stdout)
    from basecrawler import Store
    cli_store = Store(str(db))
    try:
        assert cli_store.lookup.count("vehicle_recall", "eu") == 7
    finally:
        cli_store.close()


# ---- hostile XML ---------------------------------------------------------------------------
GOOD_REPORT = (FIXTURES / "report_10000204.xml").read_bytes()


def hostile_site(hostile: bytes) -> Site:
    return Site(index_xml(("10000666", "07/08/2026", ""), ("10000204", "14/08/2026", "")),
                {"10000666": hostile, "10000204": GOOD_REPORT})


def test_external_entity_document_is_refused_without_reading_file_or_url(store, settings, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-7f3a91")
    with LoopbackServer(lambda request: Reply(200, b"NETWORK-SECRET-5c2e", {"Content-Type": "text/plain"})) as spy:
        hostile = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<!DOCTYPE Safety-Gate SYSTEM "{spy.url}/report.dtd" [\n'
            f'  <!ENTITY file SYSTEM "file://{secret}">\n'
            f'  <!ENTITY net SYSTEM "{spy.url}/entity">\n]>\n'
            '<Safety-Gate><report_date>07/08/2026</report_date><notifications>'
            '<caseNumber>SR/06666/26</caseNumber><category>Motor vehicles</category>'
            '<brand>&file;</brand><name>&net;</name></notifications></Safety-Gate>').encode()
        # The document really is an XXE: a permissive parser would read the file.
        permissive = etree.XMLParser(resolve_entities=True, load_dtd=False, no_network=True)
        file_only = hostile.replace(b"&net;", b"").replace(f"{spy.url}/".encode(), b"file:///nonexistent/")
        assert "TOP-SECRET-7f3a91" in etree.tostring(etree.fromstring(file_only, permissive), encoding="unicode")

        result = crawl(store, settings, hostile_site(hostile))

        assert spy.requests == []
    letters = store.dead_letters.open_dead_letters("eu")
    assert [(l["kind"], l["stage"]) for l in letters] == [("unsafe_xml", "fetch")]
    assert "DTD" in letters[0]["error"]
    assert store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/06666/26"}) is None
    assert store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/02101/26"}) is not None      # the next report still ran
    assert result.status == "succeeded"
    store.close()
    for path in tmp_path.rglob("*"):
        if path.is_file() and path != secret:
            data = path.read_bytes()
            if path.suffix == ".gz":
                data = gzip.decompress(data)
            assert b"TOP-SECRET-7f3a91" not in data and b"NETWORK-SECRET-5c2e" not in data, path


def test_billion_laughs_document_is_refused_quickly(store, settings, caplog):
    levels = ['<!ENTITY lol0 "lol">'] + [
        f'<!ENTITY lol{i} "{("&lol%d;" % (i - 1)) * 10}">' for i in range(1, 10)]
    hostile = ('<?xml version="1.0"?><!DOCTYPE Safety-Gate [' + "".join(levels) + ']>'
               '<Safety-Gate><notifications><caseNumber>&lol9;</caseNumber>'
               '<category>Motor vehicles</category></notifications></Safety-Gate>').encode()
    import time
    started = time.monotonic()
    result = crawl(store, settings, hostile_site(hostile))
    assert time.monotonic() - started < 10
    letters = store.dead_letters.open_dead_letters("eu")
    assert [l["kind"] for l in letters] == ["unsafe_xml"], [l["error"][:600] for l in letters]
    assert any(r.levelname == "ERROR" and "unsafe_xml" in r.getMessage() for r in caplog.records)
    assert store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/02101/26"}) is not None
    assert result.status == "succeeded"


def test_report_that_is_not_xml_is_a_dead_letter_and_the_next_report_runs(store, settings):
    result = crawl(store, settings, hostile_site(b"<html><body>Service unavailable</body></html>"))
    letters = store.dead_letters.open_dead_letters("eu")
    assert [l["kind"] for l in letters] == ["unexpected"]
    assert store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/02101/26"}) is not None and result.status == "succeeded"


def test_index_declaring_a_dtd_fails_the_source_and_no_report_is_fetched(store, settings):
    hostile_index = index_xml(("10000204", "14/08/2026", "")).replace(
        b"<Safety-Gate>", b'<!DOCTYPE Safety-Gate [<!ENTITY x "y">]><Safety-Gate>', 1)
    site = Site(hostile_index, {"10000204": GOOD_REPORT})
    result = crawl(store, settings, site)
    assert result.status == "failed" and "UnsafeXml" in result.error
    assert site.report_ids_requested() == []


# ---- every notification a product alert (issue 24) --------------------------------------------
def parsed_records(store, settings, site):
    """fetch → parse at parse level: (vehicle recall dicts, product alert field dicts by case)."""
    from basecrawler.recordtypes import Record

    source = EuSafetyGateCrawler(store, settings=settings, transport=httpx.MockTransport(site), mode="full")
    vehicles, alerts = [], {}
    for item in source.fetch_items():
        raw = item.data if hasattr(item, "data") else item
        for record in source.parse_raw(raw):
            if isinstance(record, Record):
                assert record.type == "product_alert"
                alerts.setdefault(record.fields["alert_id"], []).append(record.fields)
            else:
                vehicles.append(record)
    return vehicles, alerts


def test_every_notification_is_a_product_alert_and_vehicle_ones_are_also_vehicle_recalls(store, settings):
    from record_types.product_alert import ProductAlert

    vehicles, alerts = parsed_records(store, settings, fixture_site())
    assert set(alerts) == {"0060/05", "0061/05", "0062/05", "0063/05", "SR/01901/26", "SR/01902/26",
                           "SR/01907/26", "SR/01908/26", "SR/02101/26", "SR/02109/26", "SR/02110/26",
                           "SR/02140/26"}
    assert {v["recall_number"] for v in vehicles} == {"0061/05", "0063/05", "SR/01901/26", "SR/01907/26",
                                                      "SR/02101/26", "SR/02109/26", "SR/02140/26"}
    for fields in (f for many in alerts.values() for f in many):
        alert = ProductAlert.model_validate({"country": "EU", **fields})
        assert alert.recall_number == alert.alert_id          # the link to the vehicle recall
        assert not alert.date_unknown


def test_a_product_alert_carries_category_authority_risk_and_the_cleaned_texts(store, settings):
    _, alerts = parsed_records(store, settings, fixture_site())
    toy = alerts["SR/01902/26"][0]
    assert toy["category"] == ["Toys"] and toy["authority"] == "Poland" and toy["risk_class"] == "Serious risk"
    assert toy["title_original"] == "Toy car – Zoomi Racer" and toy["alert_date"] == "2026-07-24"
    golf = alerts["SR/01901/26"][0]
    assert golf["brand"] == "Volkswagen" and "<" not in golf["title_original"]
    legacy = alerts["0061/05"][0]                 # names from the description, legacy report
    assert legacy["title_original"] == "Meridian Tourer 2.0 (M 75)" and legacy["hazard_original"]


def test_an_alert_repeated_in_an_addendum_keeps_its_first_report_date(store, settings):
    _, alerts = parsed_records(store, settings, fixture_site())
    assert [a["alert_date"] for a in alerts["SR/02101/26"]] == ["2026-08-14", "2026-08-14"]


@pytest.mark.skipif(not REAL_REPORTS, reason="real samples folder absent")
@pytest.mark.parametrize("path", REAL_REPORTS, ids=lambda p: p.name)
def test_real_report_every_case_number_is_one_product_alert(store, settings, path):
    from record_types.product_alert import ProductAlert

    body = gzip.decompress(path.read_bytes())
    root = etree.fromstring(body)
    cases = {n.findtext("caseNumber") for n in root.iter("notifications")}
    site = Site(index_xml(("777", root.findtext("report_date"), "")), {"777": body})
    _, alerts = parsed_records(store, settings, site)
    assert set(alerts) == cases and all(len(a) == 1 for a in alerts.values())
    for (fields,) in alerts.values():
        alert = ProductAlert.model_validate({"country": "EU", **fields})
        assert alert.category and alert.authority and alert.risk_class and not alert.date_unknown


# ---- first-report dates asked in batches (issue #23) -------------------------------------------
WEEK33 = (FIXTURES / "report_10000204.xml").read_text(encoding="utf-8")
WEEK33_ALERTS = {case: re.search(rf"<notifications[^>]*>(?:(?!</notifications>).)*<caseNumber>{re.escape(case)}"
                                 rf"</caseNumber>.*?</notifications>", WEEK33).group(0)
                 for case in ("SR/02101/26", "SR/02109/26", "SR/02110/26")}   # vehicle, vehicle, clothing


def week35_report(*cases: tuple[str, str]) -> bytes:
    """A report of 28/08/2026 of week-33 notifications under other case numbers: (case, week-33 case)."""
    header = WEEK33[:WEEK33.index("<notifications")].replace("14/08/2026", "28/08/2026").replace(">33<", ">35<")
    body = "".join(WEEK33_ALERTS[like].replace(f"<caseNumber>{like}</caseNumber>", f"<caseNumber>{case}</caseNumber>")
                   for case, like in cases)
    return (header + body + "</Safety-Gate>").encode()


def test_first_report_dates_are_asked_per_chunk_and_kept_across_chunks(store, settings, monkeypatch):
    import sources.eu as eu

    crawl(store, settings, fixture_site(), since="2026-08-01", until="2026-08-15")   # week 33 stored
    monkeypatch.setattr(eu, "DATES_CHUNK", 2)
    asked = []
    real = EuSafetyGateCrawler.known_dates
    monkeypatch.setattr(EuSafetyGateCrawler, "known_dates",
                        lambda self, numbers, record_type=None: asked.append(list(numbers)) or real(self, numbers, record_type))
    monkeypatch.setattr(EuSafetyGateCrawler, "known_date", lambda *a, **k: pytest.fail("asked one notification at a time"))
    report = week35_report(("SR/02101/26", "SR/02101/26"), ("SR/02109/26", "SR/02109/26"),
                           ("SR/02110/26", "SR/02110/26"), ("SR/09001/26", "SR/02101/26"),
                           ("SR/09002/26", "SR/02110/26"), ("SR/09001/26", "SR/02109/26"))
    site = Site(index_xml(("10000206", "28/08/2026", "")), {"10000206": report})
    result = crawl(store, settings, site, since="2026-08-16")
    assert result.counts.dead_lettered == 0
    assert store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/02101/26"})["recall_date"] == "2026-08-14"   # stored: kept
    assert store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/02109/26"})["recall_date"] == "2026-08-14"
    alert = store.lookup.get("product_alert", {"source": "eu", "country": "EU", "alert_id": "SR/02110/26"})
    assert alert["alert_date"] == "2026-08-14"
    assert store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/09001/26"})["recall_date"] == "2026-08-28"   # new: this report's date
    # 6 notifications in chunks of 2: at most one question per record type and chunk, each case asked once
    assert len(asked) <= 6 and sorted(n for numbers in asked for n in numbers) == [
        "SR/02101/26", "SR/02109/26", "SR/02110/26", "SR/09001/26", "SR/09002/26"]


def test_notifications_before_a_report_breaks_off_are_still_stored(store, settings, monkeypatch):
    import sources.eu as eu

    monkeypatch.setattr(eu, "DATES_CHUNK", 10)   # the cut comes while notifications wait for their dates
    whole = week35_report(("SR/09001/26", "SR/02101/26"), ("SR/09002/26", "SR/02110/26"),
                          ("SR/09003/26", "SR/02109/26"))
    cut = whole[:whole.index(b"<caseNumber>SR/09003/26") + 40]
    site = Site(index_xml(("10000206", "28/08/2026", "")), {"10000206": cut})
    result = crawl(store, settings, site)
    assert store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/09001/26"})["recall_date"] == "2026-08-28"
    assert store.lookup.get("product_alert", {"source": "eu", "country": "EU", "alert_id": "SR/09002/26"}) is not None
    assert store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/09003/26"}) is None
    assert [letter["kind"] for letter in store.dead_letters.open_dead_letters("eu")] == ["unexpected"]   # the report, kept whole
    assert result.counts.dead_lettered == 1
