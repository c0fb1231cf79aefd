"""The narrow source API (basecrawler/pipeline/source_api.py, artifacts.Documents, text.py, the download
context manager) tested directly, one behaviour per test, with demo sources defined here and
HTTP answered by `httpx.MockTransport`. Expected values are written from the inputs below."""
import datetime as dt
import hashlib
import logging

import httpx
import pytest

from basecrawler import BaseCrawler, Recall
from basecrawler.errors import Blocked, ForeignHost, NotFound, Transient, UnexpectedContent
from basecrawler.store.core import decode_raw
from basecrawler.formats.text import clean_text, distinct_joined
from basecrawler.formats.xmlsafe import read_list

from support import ItemsCrawler

SITE = "https://api.example"


def letters(store, source):
    return [{**row, "raw": decode_raw(row["raw_kind"], row["raw"], row["raw_bytes"])}
            for row in store.dead_letters.open_dead_letters(source)]


# ---- item(): one failed item is one dead letter, the crawl goes on ------------------------------
class ItemDemo(BaseCrawler):
    """fetch(): item "a" fails inside `self.item()` with `error`, item "b" comes after it."""

    source = "itemdemo"
    country = "XX"
    endpoints = {"site": SITE}

    def __init__(self, *args, error, ledger=False, **kwargs):
        super().__init__(*args, **kwargs)
        self.error = error
        self.use_ledger = ledger
        self.scopes = []

    def fetch(self):
        for key in ("a", "b"):
            raw = {"id": key, "note": f"raw {key}"}
            url = f"{SITE}/items/{key}"
            if self.use_ledger:
                self.ledger.list(key, url=url)
            with self.ledger.attempt(key) if self.use_ledger else _nothing():
                with self.item(raw, url) as scope:
                    self.scopes.append(scope)
                    if key == "a":
                        raise self.error
                    yield raw

    def parse(self, raw):
        return {"recall_number": raw["id"].upper(), "recall_date": "2024-05-01"}


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("error", [NotFound("gone"), UnexpectedContent("an HTML page"), Transient("HTTP 503"),
                                   ForeignHost("redirected to evil.example")], ids=lambda e: type(e).__name__)
def test_item_failure_becomes_one_fetch_dead_letter_and_the_crawl_goes_on(store, settings, error):
    crawler = ItemDemo(store, settings=settings, mode="full", error=error)
    result = crawler.run()
    assert result.status == "succeeded", result.error
    [letter] = letters(store, "itemdemo")
    assert letter["stage"] == "fetch" and letter["kind"] == error.kind
    assert letter["raw"] == {"id": "a", "note": "raw a"} and letter["url"] == f"{SITE}/items/a"
    assert store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "B"}) is not None          # the item after it was still crawled
    assert [scope.failed for scope in crawler.scopes] == [True, False]


def test_blocked_inside_item_passes_through_and_ends_the_run(store, settings):
    crawler = ItemDemo(store, settings=settings, mode="full", error=Blocked("HTTP 403", status=403))
    result = crawler.run()
    assert result.status == "failed" and "403" in (result.error or "")
    assert letters(store, "itemdemo") == []
    assert store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "B"}) is None              # nothing after the block


def test_item_failure_inside_a_ledger_attempt_marks_the_list_item_failing(store, settings):
    crawler = ItemDemo(store, settings=settings, error=NotFound("gone"), ledger=True)
    assert crawler.run().status == "succeeded"
    assert [row["key"] for row in store.ledger.items("itemdemo", ("failing",))] == ["a"]
    assert [row["key"] for row in store.ledger.items("itemdemo", ("done",))] == ["b"]


# ---- read_list_document ------------------------------------------------------------------------
def read_titles(body, header=None):
    listed = read_list(body, "item", header=header, default="utf-8")
    return [node.findtext("title") for node in listed.items], listed


class ListDemo(BaseCrawler):
    source = "listdemo"
    country = "XX"
    endpoints = {"site": SITE}

    def fetch(self):
        for title in self.read_list_document(self.url("site", "/feed.xml"), read_titles, name="demo feed",
                                             label="feed /feed.xml", key="feed"):
            yield {"title": title}

    def parse(self, raw):
        return {"recall_number": raw["title"], "recall_date": "2024-05-01"}


def list_crawler(store, settings, body):
    def handler(request):
        assert request.url.path == "/feed.xml"
        return httpx.Response(200, content=body, headers={"Content-Type": "application/xml; charset=utf-8"})
    return ListDemo(store, settings=settings, mode="full", transport=httpx.MockTransport(handler))


def test_list_with_a_bare_ampersand_yields_its_items_and_a_warning(store, settings):
    body = b"<list><item><title>R-1 Nuts & bolts</title></item><item><title>R-2</title></item></list>"
    crawler = list_crawler(store, settings, body)
    result = crawler.run()
    assert result.status == "succeeded" and result.counts.fetched == 2
    assert store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "R-1 Nuts & bolts"}) is not None and store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "R-2"}) is not None
    assert crawler.warnings == ["feed /feed.xml: escaped 1 bare '&'"]
    assert letters(store, "listdemo") == []


def test_lost_list_item_is_an_unreadable_item_dead_letter_with_its_text(store, settings):
    body = b"<list><item><title>R-1</title></item><item><title>R-2</item><item><title>R-3</title></item></list>"
    result = list_crawler(store, settings, body).run()
    assert result.counts.fetched == 2
    assert store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "R-1"}) is not None and store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "R-3"}) is not None
    [letter] = letters(store, "listdemo")
    assert (letter["kind"], letter["stage"]) == ("unreadable_item", "fetch")
    assert letter["raw"] == {"feed": f"{SITE}/feed.xml", "item": "<item><title>R-2</item>"}


def test_unreadable_list_raises_unexpected_content_kept_whole_without_traceback(store, settings, caplog):
    body = b"Service unavailable, try later"
    crawler = list_crawler(store, settings, body)
    with pytest.raises(UnexpectedContent) as raised:
        crawler.read_list_document(f"{SITE}/feed.xml", read_titles, name="demo feed", label="feed", key="feed")
    assert raised.value.body == body and raised.value.url == f"{SITE}/feed.xml"
    assert "the demo feed cannot be read" in str(raised.value)

    caplog.set_level(logging.INFO)
    result = list_crawler(store, settings, body).run()
    assert result.status == "failed"
    [letter] = letters(store, "listdemo")
    assert (letter["kind"], letter["stage"]) == ("unexpected", "fetch")
    assert bytes(letter["raw"]) == body
    assert not any(record.exc_info for record in caplog.records)
    assert "Traceback" not in caplog.text


# ---- documents ---------------------------------------------------------------------------------
PDF = b"%PDF-1.4\n1 0 obj << >> endobj\ntrailer << >>\n%%EOF\n"


class DocServer:
    """Serves PDF at /doc.pdf with an ETag; honours If-None-Match with a 304."""

    def __init__(self):
        self.requests = []

    def __call__(self, request):
        self.requests.append(request)
        if request.headers.get("if-none-match") == '"v1"':
            return httpx.Response(304, headers={"ETag": '"v1"'})
        return httpx.Response(200, content=PDF, headers={"Content-Type": "application/pdf", "ETag": '"v1"'})

    def bodies_sent(self):
        return sum(1 for r in self.requests if r.headers.get("if-none-match") != '"v1"')


def doc_crawler(store, settings, server):
    return ListDemo(store, settings=settings, transport=httpx.MockTransport(server))


def test_documents_get_downloads_into_the_manifest_and_returns_a_verified_path(store, settings):
    server = DocServer()
    document = doc_crawler(store, settings, server).documents.get(f"{SITE}/doc.pdf")
    assert document.path.read_bytes() == PDF
    assert document.sha256 == hashlib.sha256(PDF).hexdigest()
    [row] = store.query("SELECT * FROM artifacts")
    assert (row["target_key"], row["state"], row["sha256"], row["etag"]) == \
        (f"{SITE}/doc.pdf", "complete", document.sha256, '"v1"')
    assert server.bodies_sent() == 1


def test_documents_get_again_with_the_same_validators_does_not_download_again(store, settings):
    server = DocServer()
    first = doc_crawler(store, settings, server).documents.get(f"{SITE}/doc.pdf")
    second = doc_crawler(store, settings, server).documents.get(f"{SITE}/doc.pdf")
    assert second.path == first.path and second.sha256 == first.sha256 and not second.drifted
    assert server.bodies_sent() == 1
    assert server.requests[-1].headers["if-none-match"] == '"v1"'


def test_documents_stored_reads_a_kept_document_back_by_its_hash(store, settings):
    document = doc_crawler(store, settings, DocServer()).documents.get(f"{SITE}/doc.pdf")
    reader = ListDemo(store, settings=settings, transport=httpx.MockTransport(lambda r: pytest.fail("no fetch")))
    assert reader.documents.stored(document.sha256) == PDF


# ---- the window and stored facts ---------------------------------------------------------------
class FactsDemo(ItemsCrawler):
    source = "facts"

    def parse(self, raw):
        return {"recall_number": raw["id"], "recall_date": raw["date"]}


def test_in_window_holds_dates_inside_the_bounds_and_undated_items(store, settings):
    crawler = FactsDemo(store, settings=settings, since="2024-03-01", until="2024-03-31")
    assert crawler.in_window(dt.date(2024, 3, 1)) and crawler.in_window(dt.date(2024, 3, 31))
    assert not crawler.in_window(dt.date(2024, 2, 29)) and not crawler.in_window(dt.date(2024, 4, 1))
    assert crawler.in_window(None)


def test_known_keys_are_the_given_numbers_this_source_has_stored(store, settings):
    FactsDemo(store, settings=settings, mode="full", items=[{"id": "K1", "date": "2024-05-01"},
                                                          {"id": "K2", "date": "2024-05-02"}]).run()
    store.upsert("vehicle_recall", [Recall(country="YY", recall_number="K3", recall_date="2024-05-03", source_lang="en")],
                         source="other")
    crawler = FactsDemo(store, settings=settings)
    assert crawler.known_keys(["K1", "K3", "K9"]) == {"K1"}


def test_known_date_is_the_stored_date_and_none_when_unknown_or_absent(store, settings):
    FactsDemo(store, settings=settings, mode="full", items=[{"id": "D1", "date": "2024-05-01"},
                                                          {"id": "D2", "date": "31/02/2024"}]).run()
    crawler = FactsDemo(store, settings=settings)
    assert crawler.known_date("D1") == "2024-05-01"
    assert store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "D2"})["date_unknown"] == 1
    assert crawler.known_date("D2") is None
    assert crawler.known_date("D9") is None



class FactsAndAlertsDemo(FactsDemo):
    """Each item is a vehicle recall and, under the same number, a product alert dated a day later."""

    def parse(self, raw):
        from basecrawler.recordtypes import Record

        alert_date = raw["date"][:-2] + f"{int(raw['date'][-2:]) + 1:02d}"
        return [{"recall_number": raw["id"], "recall_date": raw["date"]},
                Record("product_alert", {"alert_id": raw["id"], "alert_date": alert_date, "title_original": "t"})]


def test_known_date_reads_the_type_it_is_asked_for(store, settings):
    FactsAndAlertsDemo(store, settings=settings, mode="full", items=[{"id": "T1", "date": "2024-05-01"}]).run()
    crawler = FactsAndAlertsDemo(store, settings=settings)
    assert crawler.known_date("T1") == "2024-05-01"                                  # the source's own type
    assert crawler.known_date("T1", record_type="product_alert") == "2024-05-02"
    assert crawler.known_date("T9", record_type="product_alert") is None


def test_known_dates_holds_this_sources_known_dates_only(store, settings):
    FactsDemo(store, settings=settings, mode="full", items=[{"id": "D1", "date": "2024-05-01"},
                                                          {"id": "D2", "date": "31/02/2024"}]).run()
    store.upsert("vehicle_recall", [Recall(country="XX", recall_number="D3", recall_date="2024-05-03", source_lang="en")],
                         source="other")   # the same country and number, another source's record
    crawler = FactsDemo(store, settings=settings)
    assert crawler.known_dates(["D1", "D2", "D3", "D9", "D1"]) == {"D1": "2024-05-01"}


def test_known_dates_reads_the_type_it_is_asked_for(store, settings):
    FactsAndAlertsDemo(store, settings=settings, mode="full", items=[{"id": "T1", "date": "2024-05-01"}]).run()
    crawler = FactsAndAlertsDemo(store, settings=settings)
    assert crawler.known_dates(["T1", "T9"]) == {"T1": "2024-05-01"}
    assert crawler.known_dates(["T1", "T9"], record_type="product_alert") == {"T1": "2024-05-02"}


def test_known_dates_asks_the_store_once_per_500_numbers(store, settings):
    items = [{"id": f"N{n:04d}", "date": f"2024-05-{n % 28 + 1:02d}"} for n in range(1100)]
    FactsDemo(store, settings=settings, mode="full", items=items).run()
    crawler = FactsDemo(store, settings=settings)
    selects = []
    store.db.conn.set_trace_callback(lambda sql: selects.append(sql) if sql.lstrip().startswith("SELECT") else None)
    try:
        dates = crawler.known_dates([item["id"] for item in items] + ["N9999"])
    finally:
        store.db.conn.set_trace_callback(None)
    assert dates == {item["id"]: item["date"] for item in items}
    assert len(selects) == 3   # 1,101 numbers: 500 + 500 + 101, one keyed query each

# ---- download_to_file owns its temp file -------------------------------------------------------
def download_crawler(store, settings):
    return ListDemo(store, settings=settings,
                    transport=httpx.MockTransport(lambda request: httpx.Response(200, content=b"body bytes")))


def test_download_to_file_in_a_with_removes_its_temp_file_after_the_block(store, settings):
    with download_crawler(store, settings).http.download_to_file(f"{SITE}/file.bin") as download:
        assert download.path.read_bytes() == b"body bytes" and download.size == 10
        path = download.path
    assert not path.exists()


def test_download_to_file_removes_its_temp_file_when_the_block_raises(store, settings):
    with pytest.raises(RuntimeError, match="parser broke"):
        with download_crawler(store, settings).http.download_to_file(f"{SITE}/file.bin") as download:
            path = download.path
            assert path.exists()
            raise RuntimeError("parser broke")
    assert not path.exists()


# ---- text helpers ------------------------------------------------------------------------------
def test_clean_text_strips_markup_and_entities_only_when_asked():
    assert clean_text("<p>Brake <b>hose</b> &amp; clamp</p>", markup=True) == "Brake  hose  & clamp"
    assert clean_text("<p>Brake</p> &amp;") == "<p>Brake</p> &amp;"


def test_clean_text_repairs_mojibake():
    assert clean_text("MÃ¼ller GmbH") == "Müller GmbH"


def test_clean_text_gives_none_for_placeholders_and_blanks():
    assert clean_text(" Unknown ", absent={"unknown", "n/a"}) is None
    assert clean_text("   ") is None and clean_text(None) is None
    assert clean_text("Unknown") == "Unknown"                  # a placeholder only when named


def test_clean_text_squashes_white_space_when_asked():
    assert clean_text(" Front\n\n axle\xa0 nut ", squash_space=True) == "Front axle nut"
    assert clean_text(" Front\n axle ") == "Front\n axle"


def test_distinct_joined_keeps_first_order_and_drops_duplicates_and_blanks():
    assert distinct_joined(["Civic", "Accord", None, "", "Civic", "Jazz"]) == "Civic, Accord, Jazz"
    assert distinct_joined(["B", "A", "B"], " / ") == "B / A"
    assert distinct_joined([None, ""]) is None
