"""Every failure of one item is that item's dead letter (issue 22.3): a redirect loop, a body over
its bounds, a server too slow, an unexpected exception — classified, counted, kept with what
was received, one line on the terminal, and the source goes on with its next item. A list
document over its bounds fails its source (one line), and the other sources still run."""
from __future__ import annotations

import logging
import re

import pytest
from lxml import etree

from basecrawler import BaseCrawler, Raw
from basecrawler.fetch.archive import Archive
from basecrawler.pipeline.runner import run_sources
from basecrawler.testing import LoopbackServer, Reply, fast_settings
from hostile_support import RawServer, endless_body, gzip_bomb, slowloris
from sources.eu import EuSafetyGateCrawler, is_vehicle_category
from test_eu import FIXTURES, INDEX_PATH, REPORT_PATH, index_xml


def _no_traceback_logged(caplog):
    shown = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert [r.getMessage() for r in shown if r.exc_info] == []
    assert [r.getMessage() for r in shown if "\n" in r.getMessage()] == []


def _vehicle_cases(report_file: str) -> set[str]:
    root = etree.parse(str(FIXTURES / report_file)).getroot()
    return {n.findtext("caseNumber") for n in root.iter("notifications") if is_vehicle_category(n.findtext("category"))}


# ---- the EU weekly reports: one loops, two are healthy -----------------------------------------
def test_a_redirect_loop_on_one_eu_report_of_three_keeps_the_two_healthy_ones(store, settings, monkeypatch, caplog):
    reports = {"10000201": "report_10000201.xml", "10000204": "report_10000204.xml",
               "10000205": "report_10000205.xml"}
    index = index_xml(("10000201", "24/07/2026", ""), ("10000204", "14/08/2026", ""), ("10000205", "21/08/2026", ""))

    def site(request):
        path = request.path.split("?")[0]
        if path == INDEX_PATH:
            return Reply(body=index, headers={"Content-Type": "application/xml"})
        report_id = path[len(REPORT_PATH):]
        if report_id == "10000204":   # answers every request with a redirect to itself
            return Reply(302, headers={"Location": request.path})
        return Reply(body=(FIXTURES / reports[report_id]).read_bytes(), headers={"Content-Type": "application/xml"})

    with LoopbackServer(site) as server:
        monkeypatch.setenv("BASECRAWLER_EU_SITE_URL", server.url)
        monkeypatch.setenv("BASECRAWLER_EU_RATE", "1000")
        result = EuSafetyGateCrawler(store, settings=settings, mode="full").run()

    stored = {r["recall_number"] for r in store.query("SELECT recall_number FROM recalls WHERE source = 'eu'")}
    healthy = _vehicle_cases("report_10000201.xml") | _vehicle_cases("report_10000205.xml")
    assert healthy and stored == healthy - _vehicle_cases("report_10000204.xml") | (stored & healthy)
    assert healthy <= stored
    letters = store.dead_letters.open_dead_letters("eu")
    assert [(l["kind"], "10000204" in (l["url"] or "")) for l in letters] == [("too_many_redirects", True)]
    assert result.status == "succeeded" and result.counts.dead_lettered == 1
    _no_traceback_logged(caplog)


# ---- a source of three detail items, one of them hostile -------------------------------------
class ThreeItems(BaseCrawler):
    """Three items fetched one by one; which one is hostile is up to the server."""

    source = "three"
    country = "TH"
    endpoints = {"site": "http://placeholder.test"}

    def fetch(self):
        for number in ("1", "2", "3"):
            url = self.url("site", f"/item/{number}")
            with self.item({"number": number}, url, key=f"T-{number}"):
                yield Raw(self.http.get_json(url), url=url)

    def parse(self, raw):
        if raw.get("explode"):
            raise AssertionError("never reached: an item failing in fetch is no parse error")
        return {"recall_number": f"T-{raw['n']}", "recall_date": "2024-05-01"}


def _serve_items(hostile):
    """Items 1 and 3 are fine JSON; item 2 is answered by `hostile(h)` (a RawServer handler)."""
    def handler(h):
        number = h.path.rsplit("/", 1)[1]
        if number == "2":
            return hostile(h)
        body = b'{"n": %s}' % number.encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.write(body)
    return handler


def _redirect_to_itself(h):
    h.send_response(302)
    h.send_header("Location", h.path)
    h.send_header("Content-Length", "0")
    h.send_header("Connection", "close")
    h.end_headers()


def _garbage(h):
    h.wfile.write(b"this is not HTTP at all\r\n\r\n")


@pytest.mark.parametrize("hostile, kind", [
    (gzip_bomb(1200), "too_large"),
    (endless_body(2048), "too_large"),
    (slowloris(seconds=30), "too_slow"),
    (_redirect_to_itself, "too_many_redirects"),
    (_garbage, "transient"),
])
def test_one_hostile_item_is_a_dead_letter_and_the_others_are_stored(store, db_path, monkeypatch, caplog,
                                                                     hostile, kind):
    settings = fast_settings(db_path, max_document_bytes=4 << 20, min_rate_grace_s=1.0, min_rate_bps=200,
                             max_retries=1)
    with RawServer(_serve_items(hostile)) as server:
        monkeypatch.setenv("BASECRAWLER_THREE_SITE_URL", server.url)
        result = ThreeItems(store, settings=settings).run()
    assert {r["recall_number"] for r in store.query("SELECT recall_number FROM recalls")} == {"T-1", "T-3"}
    letters = store.dead_letters.open_dead_letters("three")
    assert [(l["kind"], l["record_key"], l["url"].endswith("/item/2")) for l in letters] == [(kind, "T-2", True)]
    assert result.status == "succeeded" and result.counts.dead_lettered == 1
    _no_traceback_logged(caplog)


def test_a_refused_body_keeps_what_was_received_in_the_archive(store, db_path, monkeypatch):
    settings = fast_settings(db_path, max_document_bytes=1 << 20)
    with RawServer(_serve_items(endless_body(64))) as server:
        monkeypatch.setenv("BASECRAWLER_THREE_SITE_URL", server.url)
        ThreeItems(store, settings=settings).run()
    (letter,) = store.dead_letters.open_dead_letters("three")
    assert letter["kind"] == "too_large" and letter["response_sha256"]
    kept = Archive(store).get_bytes(letter["response_sha256"])
    assert kept.startswith(b"[0,0,0") and 0 < len(kept) <= 64 * 1024   # the head, not the whole body


class Buggy(ThreeItems):
    source = "buggy"

    def fetch(self):
        for number in ("1", "2", "3"):
            with self.item({"number": number}, key=f"T-{number}"):
                if number == "2":
                    {}["a key the code expected"]   # a bug hit by one odd item
                yield {"n": number}


def test_an_unexpected_exception_in_one_item_is_its_dead_letter_with_the_traceback(store, settings, caplog):
    result = Buggy(store, settings=settings).run()
    assert {r["recall_number"] for r in store.query("SELECT recall_number FROM recalls")} == {"T-1", "T-3"}
    (letter,) = store.dead_letters.open_dead_letters("buggy")
    assert letter["kind"] == "item_error" and letter["record_key"] == "T-2"
    assert letter["error"].startswith("KeyError: ") and "Traceback (most recent call last)" in letter["error"]
    assert re.search(r'line \d+, in fetch', letter["error"])
    assert result.status == "succeeded"
    _no_traceback_logged(caplog)
    assert any(r.levelname == "ERROR" and "item_error" in r.getMessage() for r in caplog.records)


# ---- a list document over its bounds: its source fails, the others run --------------------------
class HugeList(BaseCrawler):
    source = "huge"
    country = "HU"
    endpoints = {"site": "http://placeholder.test"}

    def fetch(self):
        yield from self.http.get_json(self.url("site", "/list.json"))

    def parse(self, raw):
        return {"recall_number": str(raw), "recall_date": "2024-05-01"}


class Fine(Buggy):
    source = "fine"

    def fetch(self):
        yield {"n": "9"}


def test_a_list_over_its_bounds_fails_its_source_in_one_line_and_the_others_run(store, db_path, monkeypatch, caplog):
    settings = fast_settings(db_path, max_document_bytes=2 << 20)
    with RawServer(gzip_bomb(1200)) as server:
        monkeypatch.setenv("BASECRAWLER_HUGE_SITE_URL", server.url)
        summary = run_sources({"huge": HugeList, "fine": Fine}, settings=settings, store=store)
    assert summary.statuses() == {"huge": "failed", "fine": "succeeded"}
    (huge, _) = summary.results
    assert huge.error.startswith("TooLarge: ") and "compression bomb" in huge.error
    _no_traceback_logged(caplog)
