"""Hostile input, second round (issue #34 items 1-5): structural limits on parsed documents,
the item's error boundary between parse() and the store, byte-order marks, types as declared,
path segments built from publisher data. Each reproduction that could exhaust memory runs in
a child process capped at 300 MB of address space (tests/hostile_round2_child.py)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import subprocess_env

REPO = Path(__file__).resolve().parents[1]
CHILD = Path(__file__).resolve().parent / "hostile_round2_child.py"
CAP_MB = 300


def good(nid: str) -> dict:
    return {"NID": nid, "Title": f"Alert {nid}", "URL": f"https://recalls-rappels.canada.ca/en/alert-recall/{nid}",
            "Organization": "CFIA", "Product": "Cheese", "Issue": "Microbiology - Listeria", "What you should do": "Do not eat.",
            "Category": "Food", "Recall class": "Class 1", "Last updated": "2024-05-01", "Archived": "0"}


def run_capped(tmp_path, body: bytes) -> dict:
    path = tmp_path / "hostile.json"
    path.write_bytes(body)
    done = subprocess.run([sys.executable, str(CHILD), str(path), str(tmp_path / "child.db"), str(CAP_MB)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=subprocess_env())
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def adds_up(counts: dict) -> bool:
    stored = counts["out_of_range"] + counts["new"] + counts["updated"] + counts["unchanged"] + counts["merged"]
    return (counts["parsed"] == stored + counts["store_failed"]
            and counts["fetched"] == counts["parsed"] + counts["skipped"] + counts["unparseable"])


# ---- 1. structural limits (the three reproductions of the issue) ---------------------------
def test_a_200kb_file_of_100000_nested_arrays_ends_bounded_as_one_dead_letter(tmp_path):
    body = b"[" * 100_000 + b"]" * 100_000   # the top-level array holds one item, 99,999 levels deep
    outcome = run_capped(tmp_path, body)
    # Its only item unparseable: a suspect run (not a failed source), its line adding up.
    assert outcome["status"] == "suspect" and outcome["error"] is None, outcome["line"]
    assert outcome["letters"] == ["too_deep"] and outcome["stored"] == []
    assert adds_up(outcome["counts"]), outcome["line"]


def test_20000_levels_between_two_good_alerts_keep_both(tmp_path):
    deep = b"[" * 20_000 + b"]" * 20_000
    body = b"[" + json.dumps(good("1")).encode() + b"," + deep + b"," + json.dumps(good("2")).encode() + b"]"
    outcome = run_capped(tmp_path, body)
    assert outcome["stored"] == ["1", "2"] and outcome["letters"] == ["too_deep"]
    assert adds_up(outcome["counts"]) and outcome["counts"]["unparseable"] == 1, outcome["line"]


def test_one_value_nested_1200_deep_among_two_good_alerts_is_that_alerts_dead_letter(tmp_path):
    body = json.dumps([good("1"), good("2"), good("3")]).encode()
    value = b"[" * 1200 + b'"x"' + b"]" * 1200
    marker = b'"NID": "2",'
    body = body.replace(marker, marker + b' "Extra": ' + value + b",", 1)
    outcome = run_capped(tmp_path, body)
    assert outcome["status"] == "succeeded", outcome["line"]
    assert outcome["stored"] == ["1", "3"] and outcome["letters"] == ["too_deep"]
    assert outcome["counts"]["fetched"] == 3 and outcome["counts"]["unparseable"] == 1
    assert adds_up(outcome["counts"]), outcome["line"]


# ---- 2. nothing between parse() and the store fails the source ------------------------------
from basecrawler import BaseCrawler  # noqa: E402


def nested(depth: int):
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value


class Three(BaseCrawler):
    """Three recalls; the second one's `extra` carries what the test gives it."""

    source = "three2"
    country = "XX"
    endpoints = {"site": "http://placeholder.test"}
    hostile: object = None

    def fetch(self):
        yield from ("1", "2", "3")

    def parse(self, raw):
        extra = {"odd": self.hostile} if raw == "2" else {}
        return {"recall_number": f"T-{raw}", "recall_date": "2024-05-01", "extra": extra}


def _run_three(store, settings, hostile):
    crawler = type("ThreeHostile", (Three,), {"hostile": hostile})(store, settings=settings)
    result = crawler.run()
    numbers = {r["recall_number"] for r in store.query("SELECT recall_number FROM recalls WHERE source = 'three2'")}
    return result, numbers, store.dead_letters.open_dead_letters("three2")


def test_a_record_nested_1200_deep_from_parse_is_its_items_dead_letter_before_the_store(store, settings):
    result, numbers, letters = _run_three(store, settings, nested(1200))
    assert result.status == "succeeded", result.summary_line()
    assert numbers == {"T-1", "T-3"}
    assert [(letter["stage"], letter["kind"]) for letter in letters] == [("parse", "too_deep")]
    assert adds_up(vars(result.counts)) and result.counts.unparseable == 1, result.summary_line()


class Unwritable:
    """A value no serialiser can write: pickle, repr, str (the store's JSON fallback) all refuse it."""

    def __reduce__(self):
        raise TypeError("cannot pickle Unwritable")

    def __repr__(self):
        raise RecursionError("maximum recursion depth exceeded while getting the repr of an object")

    __str__ = __repr__


def test_a_record_the_store_cannot_serialise_is_one_store_dead_letter_and_the_batch_is_stored(store, settings):
    result, numbers, letters = _run_three(store, settings, Unwritable())
    assert result.status == "succeeded", result.summary_line()
    assert numbers == {"T-1", "T-3"}
    assert [(letter["stage"], letter["kind"]) for letter in letters] == [("store", "store_error")]
    assert adds_up(vars(result.counts)) and result.counts.store_failed == 1, result.summary_line()


# ---- 5. path segments built from publisher data ---------------------------------------------
from urllib.parse import parse_qs, urlsplit  # noqa: E402

from basecrawler.errors import UnsafePath  # noqa: E402


def test_au_a_recall_number_is_one_encoded_segment_and_a_dot_segment_is_refused():
    from sources.au import detail_path

    assert detail_path("REC-1/../../etc/passwd?x#y") == "/recalls/rec-1%2F..%2F..%2Fetc%2Fpasswd%3Fx%23y"
    with pytest.raises(UnsafePath):
        detail_path("..")


def test_us_a_campaign_number_stays_one_query_value_on_the_detail_path():
    from sources.us import DETAIL_PATH, detail_query

    query = detail_query("../../etc/passwd?a=1&b#c")
    parts = urlsplit("https://api.example" + query)
    assert parts.path == DETAIL_PATH and parts.fragment == ""
    assert parse_qs(parts.query) == {"campaignNumber": ["../../etc/passwd?a=1&b#c"]}


@pytest.mark.parametrize("advertised", [
    "https://ec.europa.eu/safety-gate-alerts/api/download/weeklyReport/detail/xml/../../../../../etc/passwd/"
    "weeklyReport/detail/xml/77",
    "https://ec.europa.eu/x/%2e%2e/%2E%2E/weeklyReport/detail/xml/77",
])
def test_eu_an_advertised_report_path_with_dot_segments_is_not_followed(advertised):
    from sources.eu import REPORT_PATH, WeeklyReport, report_request_path

    path = report_request_path(WeeklyReport("2024/1", None, 2024, 1, advertised, "77"))
    assert path.split("?")[0] == REPORT_PATH.format(id="77")


def test_eu_the_canonical_report_path_encodes_the_id_as_one_segment():
    from sources.eu import WeeklyReport, report_request_path

    path = report_request_path(WeeklyReport("2024/1", None, 2024, 1, None, "7/../8"))
    assert path.split("?")[0].endswith("/xml/7%2F..%2F8")


@pytest.mark.parametrize("link", ["http://www.mlit.go.jp/report/../../etc/passwd",
                                  "http://www.mlit.go.jp/report/%2e%2e/%2e%2e/etc/passwd"])
def test_jp_a_feed_link_with_dot_segments_is_refused(store, settings, link):
    from sources.jp import JpCrawler

    crawler = JpCrawler(store, settings=settings)
    with pytest.raises(UnsafePath):
        crawler._site_url(crawler.context, link)
    assert crawler._site_url(crawler.context, "http://www.mlit.go.jp/report/press/a.html").endswith(
        "/report/press/a.html")


# ---- issue #31 item 3: markup inside a field that is text -----------------------------------
def test_eu_a_case_number_with_a_line_break_tag_is_the_case_number():
    from lxml import etree

    from sources.eu_text import element_value

    assert element_value(etree.fromstring(b"<caseNumber>1150/09<br/></caseNumber>")) == "1150/09"
    assert element_value(etree.fromstring(b"<caseNumber>A12/0001/<b>24</b></caseNumber>")) == "A12/0001/24"
    # A real list stays a list.
    assert element_value(etree.fromstring(b"<pictures><picture>a.jpg</picture><picture>b.jpg</picture></pictures>")) \
        == ["a.jpg", "b.jpg"]


# ---- 3. byte-order marks -------------------------------------------------------------------
def _hc_run(store, settings, body: bytes):
    import httpx

    from sources.hc import FILE_PATH, HealthCanadaAlertsCrawler

    def handler(request):
        if request.url.path != FILE_PATH:
            return httpx.Response(404)
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    result = HealthCanadaAlertsCrawler(store, settings=settings, transport=httpx.MockTransport(handler)).run()
    rows = {row["alert_id"]: dict(row) for row in store.query("SELECT * FROM product_alerts WHERE source = 'hc'")}
    return result, rows, store.dead_letters.open_dead_letters("hc")


@pytest.mark.parametrize("bom,codec", [(b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")])
def test_hc_a_file_with_a_byte_order_mark_is_read_whole(store, settings, bom, codec):
    alerts = [good("1"), {**good("2"), "Title": "Fromage é 日本"}]
    result, rows, letters = _hc_run(store, settings, bom + json.dumps(alerts, ensure_ascii=False).encode(codec))
    assert result.status == "succeeded", result.summary_line()
    assert sorted(rows) == ["1", "2"] and rows["2"]["title_original"] == "Fromage é 日本" and letters == []


def test_xml_list_with_a_utf16_byte_order_mark_is_read():
    from basecrawler.formats.xmlsafe import read_list

    body = '<?xml version="1.0" encoding="UTF-16"?><list><item>é</item><item>b</item></list>'.encode("utf-16")
    listed = read_list(body, "item")
    assert ["".join(item.itertext()) for item in listed.items] == ["é", "b"]


# ---- 4. types as declared ------------------------------------------------------------------
def test_hc_a_list_or_object_where_text_is_published_is_a_validation_dead_letter_never_a_repr(store, settings):
    alerts = [good("1"), {**good("2"), "Title": ["1"]}, {**good("3"), "Product": {"x": 1}}, {**good("4"), "NID": 4}]
    result, rows, letters = _hc_run(store, settings, json.dumps(alerts).encode())
    assert sorted(rows) == ["1", "4"], result.summary_line()
    assert [letter["kind"] for letter in letters] == ["validation", "validation"]
    assert {letter["error"].split(":")[1].strip() for letter in letters} == {"title_original", "product_original"}
    assert not any("['" in str(value) or "{'" in str(value) for row in rows.values() for value in row.values())
    assert adds_up(vars(result.counts))


def test_hc_a_category_list_of_texts_is_several_categories(store, settings):
    result, rows, letters = _hc_run(store, settings, json.dumps([{**good("1"), "Category": ["Food", "Toys - Food"]}]).encode())
    assert json.loads(rows["1"]["category"]) == ["Food", "Toys"] and letters == []


def test_a_list_inside_a_multi_valued_field_is_refused_by_the_model_not_stored_as_a_repr():
    from pydantic import ValidationError

    from record_types.product_alert import ProductAlert

    fields = {"country": "CA", "alert_id": "1", "alert_date": "2024-05-01"}
    assert ProductAlert.model_validate({**fields, "category": ["Food", 3]}).category == ["Food", "3"]
    with pytest.raises(ValidationError, match="a list inside a list of values"):
        ProductAlert.model_validate({**fields, "category": [["Food", "Toys"]]})
    with pytest.raises(ValidationError, match="a dict inside a list of values"):
        ProductAlert.model_validate({**fields, "category": [{"x": 1}]})


# ---- 1. XML and HTML: libxml2's own depth limit (no huge_tree) bounds every tree ---------------
def test_xml_an_item_nested_100000_deep_is_lost_alone_and_the_others_read():
    from basecrawler.formats.xmlsafe import read_list

    deep = "<a>" * 100_000 + "</a>" * 100_000
    listed = read_list(f"<list><item>1</item><item>{deep}</item><item>3</item></list>".encode(), "item")
    assert ["".join(item.itertext()) for item in listed.items] == ["1", "3"]
    assert len(listed.lost) == 1 and "Excessive depth" in listed.lost[0][1]


def test_html_a_page_nested_100000_deep_is_read_bounded_with_its_text():
    from sources.au import html_document

    doc = html_document("<html><body><p>first</p>" + "<div>" * 100_000 + "</div>" * 100_000 + "<p>last</p></body></html>")
    assert max(sum(1 for _ in element.iterancestors()) for element in doc.iter()) < 300
    assert doc.xpath("//p")[0].text == "first"


# ---- 1. the us list pages (json.loads, then each row checked) --------------------------------
def _us_run(store, settings, body: bytes):
    import httpx

    from sources.us import UsCrawler

    def handler(request):
        if request.url.host == "data.transportation.gov":
            return httpx.Response(200, content=body, headers={"content-type": "application/json"})
        return httpx.Response(404)

    return UsCrawler(store, settings=settings, transport=httpx.MockTransport(handler)).run()


def us_row(number: str) -> dict:
    return {"nhtsa_id": number, "report_received_date": "2024-05-01T00:00:00.000", "manufacturer": "Maker",
            "subject": "Brakes"}


def test_us_a_row_nested_too_deep_is_its_dead_letter_and_the_other_rows_are_stored(store, settings):
    body = json.dumps([us_row("24V001000"), {**us_row("24V002000"), "odd": nested(200)}, us_row("24V003000")]).encode()
    result = _us_run(store, settings, body)
    numbers = {row["recall_number"] for row in store.query("SELECT recall_number FROM recalls WHERE source = 'us'")}
    assert numbers == {"24V001000", "24V003000"}, result.summary_line()
    assert [letter["kind"] for letter in store.dead_letters.open_dead_letters("us")] == ["too_deep"]
    assert adds_up(vars(result.counts)), result.summary_line()


def test_us_a_page_nested_past_the_json_reader_is_a_clear_refusal_not_a_recursion_error(store, settings):
    result = _us_run(store, settings, b"[" * 100_000 + b"]" * 100_000)
    assert result.status == "failed" and result.error.startswith("UnexpectedContent: "), result.error


def test_html_with_a_utf16_byte_order_mark_is_decoded_by_it_over_a_lying_header():
    from basecrawler.formats.textcodec import decode_text

    body = "<html><body><p>Rappel é</p></body></html>".encode("utf-16")
    assert decode_text(body, header="iso-8859-1", default="utf-8").text.endswith("<p>Rappel é</p></body></html>")


def test_a_record_nested_2500_deep_behind_an_endpoint_override_is_still_its_too_deep_letter(store, settings,
                                                                                              monkeypatch):
    # With an override, preparing looks for links in `extra` (marshal, which refuses 2,000
    # levels, then repr, which recurses): the structure check comes first, so the letter says why.
    monkeypatch.setenv("BASECRAWLER_THREE2_SITE_URL", "http://127.0.0.1:9")
    result, numbers, letters = _run_three(store, settings, nested(2500))
    assert numbers == {"T-1", "T-3"} and [letter["kind"] for letter in letters] == ["too_deep"], result.summary_line()


def test_eu_one_notification_nested_300_deep_is_stored_as_text_and_the_report_read_whole(store, settings):
    import re

    import httpx

    from sources.eu import EuSafetyGateCrawler
    from test_eu import FIXTURES, Site, index_xml

    body = (FIXTURES / "report_10000201.xml").read_bytes()
    cases = [case.decode() for case in re.findall(rb"<caseNumber>([^<]*)", body)]
    # Inside the second notification's own description (whichever side of the case number it is).
    second = body.index(b"<caseNumber>" + cases[1].encode())
    start = body.rindex(b"<notifications", 0, second)
    opening = body.index(b"<description", start)
    opening = body.index(b">", opening) + 1
    deep = b"<b>" * 300 + b"deep text " + b"</b>" * 300
    site = Site(index_xml(("10000201", "01/05/2024", "")), {"10000201": body[:opening] + deep + body[opening:]})
    result = EuSafetyGateCrawler(store, settings=settings, transport=httpx.MockTransport(site), mode="full").run()
    stored = {row["alert_id"]: dict(row) for row in store.query("SELECT * FROM product_alerts WHERE source = 'eu'")}
    assert sorted(stored) == sorted(cases), result.summary_line()
    assert "deep text" in stored[cases[1]]["description_original"] and "<b>" not in stored[cases[1]]["description_original"]
    assert store.dead_letters.open_dead_letters("eu") == [] and result.warnings
