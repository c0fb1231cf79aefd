"""sources/jp.py: MLIT feed → press page → recall list PDF → records (text PDFs and scans)."""
import datetime as dt
import json
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import httpx
import pytest

from basecrawler.formats.pdf import read_pdf
from sources.jp import JpCrawler, parse_feed, parse_press_page, records_from_list

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures" / "jp"
REAL_SAMPLES = REPO.parent / "shared" / "real-samples"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
SITE = "https://www.mlit.go.jp"

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_pdf import needs_ocr  # noqa: E402


@pytest.fixture(autouse=True)
def _no_request_spacing(monkeypatch):
    # The source is polite to the real site (1 request/s); offline tests need no spacing.
    monkeypatch.setenv("BASECRAWLER_JP_RATE", "1000")


@lru_cache(maxsize=None)
def extracted(name: str) -> tuple:
    return tuple(page.to_dict() for page in read_pdf((FIXTURES / name).read_bytes()))


def records_of(name: str, press_date: str = "2024-09-06") -> list[dict]:
    doc = {"press_url": f"{SITE}/report/press/x.html", "press_date": press_date, "pages": list(extracted(name))}
    records, rejected = records_from_list(doc)
    assert rejected == []
    return records


def as_date(japanese: str) -> dt.date:
    from basecrawler.formats.dates import parse_date
    return parse_date(japanese)


# ---- feed and press page ---------------------------------------------------------------------

def test_shift_jis_feed_is_decoded_from_its_declaration():
    items = parse_feed((FIXTURES / "pressrelease.rdf").read_bytes())
    titles = [item.title for item in items]
    assert "リコールの届出について（ドゥカティ　パニガーレV４　他）" in titles
    assert "少数台数のリコール届出の公表について" in titles
    ducati = next(i for i in items if "ドゥカティ" in i.title)
    assert ducati.date == dt.date(2024, 9, 6)
    assert ducati.link == "http://www.mlit.go.jp/report/press/jidosha08_hh_005221.html"


def test_feed_with_windows_31j_characters_still_parses():
    # ① is outside Shift_JIS proper; the site writes it anyway (Windows-31J).
    titles = [item.title for item in parse_feed((FIXTURES / "pressrelease.rdf").read_bytes())]
    assert any("第①回" in t for t in titles)


def test_feed_with_a_dtd_is_refused_before_any_entity_is_resolved():
    body = ('<?xml version="1.0" encoding="Shift_JIS"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
            '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/">'
            '<item><title>リコールの届出について（&x;）</title><link>http://www.mlit.go.jp/a.html</link></item>'
            '</rdf:RDF>').encode("shift_jis")
    from basecrawler.formats.xmlsafe import UnsafeXml
    with pytest.raises(UnsafeXml, match="declares a DTD"):
        parse_feed(body)


@pytest.mark.skipif(not REAL_SAMPLES.is_dir(), reason="real samples folder absent")
def test_real_feed_sample_yields_its_recall_items():
    from sources.jp import RECALL_TITLE_RE

    items = parse_feed((REAL_SAMPLES / "mlit_pressrelease_20240908.rdf").read_bytes())
    recalls = [i for i in items if RECALL_TITLE_RE.match(i.title)]
    assert [i.link.rsplit("/", 1)[1] for i in recalls] == [
        "jidosha08_hh_005221.html", "jidosha08_hh_005222.html", "jidosha08_hh_005220.html"]


@pytest.mark.skipif(not REAL_SAMPLES.is_dir(), reason="real samples folder absent")
def test_real_press_page_gives_date_and_list_pdf_not_the_diagram():
    text = (REAL_SAMPLES / "mlit_jidosha08_hh_005221.html").read_text(encoding="utf-8")
    page = parse_press_page(text, f"{SITE}/report/press/jidosha08_hh_005221.html")
    assert page.date == dt.date(2024, 9, 6)
    assert page.list_pdf == f"{SITE}/report/press/content/001761787.pdf"


def test_press_page_with_full_width_date_is_read():
    text = (FIXTURES / "jidosha08_hh_005222.html").read_text(encoding="utf-8")
    page = parse_press_page(text, f"{SITE}/report/press/jidosha08_hh_005222.html")
    assert page.date == dt.date(2024, 9, 5)     # 令和６年９月５日
    assert page.list_pdf == f"{SITE}/report/press/content/001761801.pdf"


# ---- records from text PDFs ---------------------------------------------------------------------

@pytest.mark.parametrize("name", ["list_ducati_single.pdf", "list_honda_single.pdf"])
def test_single_recall_layout_gives_exact_record(name):
    (record,) = records_of(name)
    (want,) = EXPECTED[name]
    assert record["recall_number"] == want["recall_number"]
    assert record["recall_date"] == as_date(want["recall_start_date"])
    assert record["affected_units"] == want["affected_units"]
    assert record["component_original"] == want["component"]
    assert record["defect_cause_original"] == want["defect_cause"]
    assert record["remedy_original"] == want["remedy"]
    assert record["manufacturer_original"] == want["vehicles"][0]["maker"]
    assert record["model_original"] == "、".join(v["name"] for v in want["vehicles"])
    vehicles = record["extra"]["vehicles"]
    assert [(v["type_code"], v["name"], v["chassis_range"], v["production_period"], v["units"]) for v in vehicles] == \
        [(v["type_code"], v["name"], v["chassis_range"], v["production_period"], v["units"]) for v in want["vehicles"]]
    assert record["extra"]["notifier"] == want["notifier"]
    assert record["extra"]["total_units_stated"] == want["affected_units"]
    assert "unreadable" not in record["extra"]


def test_small_batch_layout_gives_one_exact_record_per_notification_number():
    records = records_of("list_small_batch.pdf")
    want = EXPECTED["list_small_batch.pdf"]
    assert [r["recall_number"] for r in records] == [w["recall_number"] for w in want]
    assert [r["recall_date"] for r in records] == [as_date(w["notified_date"]) for w in want]
    assert [r["affected_units"] for r in records] == [w["affected_units"] for w in want]
    assert [r["component_original"] for r in records] == [w["component"] for w in want]
    assert [r["extra"]["notifier"] for r in records] == [w["notifier"] for w in want]
    assert [[(v["maker"], v["type_code"], v["name"], v["production_period"], v["units"]) for v in r["extra"]["vehicles"]]
            for r in records] == \
        [[(v["maker"], v["type_code"], v["name"], v["production_period"], v["units"]) for v in w["vehicles"]]
         for w in want]


def test_continuation_row_without_number_joins_the_recall_above():
    fuso = next(r for r in records_of("list_small_batch.pdf") if r["recall_number"] == "5402")
    assert [v["type_code"] for v in fuso["extra"]["vehicles"]] == ["2PG-FEB80", "2RG-FBA60"]
    assert fuso["affected_units"] == 37 + 21


def test_records_say_they_were_read_from_the_text_layer():
    assert {r["extra"]["read_method"] for r in records_of("list_small_batch.pdf")} == {"text"}


def _doc_with_cells(start_date="令和6年9月7日", units=("1,786台", "758台"), total="2,544台", method="ocr"):
    rows = [["リコール届出番号", "4526", "リコール開始日", start_date]]
    vehicle_rows = [["車名", "型式", "通称名", "リコール対象車の車台番号の範囲及び製作期間", "リコール対象車の台数", "備考"]]
    vehicle_rows += [["ホンダ", f"8BL-NC5{i}", f"GB35{i}", "令和3年3月1日〜令和6年6月28日", u, ""] for i, u in enumerate(units)]
    vehicle_rows.append(["合計", "", "", "", total, ""])
    tables = [rows, vehicle_rows]
    confidence = [[[90.0] * len(r) for r in t] for t in tables]
    return {"press_date": "2024-09-06", "press_url": "u", "pages": [
        {"number": 1, "method": method, "text": "", "tables": tables, "confidence": confidence}]}


def test_nonexistent_start_date_falls_back_to_press_date_and_is_flagged():
    (record,), _ = records_from_list(_doc_with_cells(start_date="令和6年2月30日", method="text"))
    assert record["recall_date"] == dt.date(2024, 9, 6)
    assert record["extra"]["unreadable"]["recall_start_date"] == "令和6年2月30日"
    assert record["extra"]["recall_start_date"] is None


def test_ocr_count_that_is_not_a_number_is_left_empty_and_flagged():
    (record,), _ = records_from_list(_doc_with_cells(units=("1.786台", "758台")))
    assert record["extra"]["vehicles"][0]["units"] is None
    assert record["extra"]["unreadable"]["vehicles[0].units"] == "1.786台"
    assert record["affected_units"] is None


def test_ocr_counts_contradicting_the_stated_total_are_not_summed():
    (record,), _ = records_from_list(_doc_with_cells(total="2,644台"))
    assert record["affected_units"] is None
    assert "2644" in record["extra"]["unreadable"]["affected_units"]


def test_ocr_date_far_from_the_press_date_is_a_misread_not_a_date():
    (record,), _ = records_from_list(_doc_with_cells(start_date="令和8年9月7日"))
    assert record["recall_date"] == dt.date(2024, 9, 6)
    assert record["extra"]["unreadable"]["recall_start_date"] == "令和8年9月7日"


def test_low_confidence_ocr_number_is_not_trusted():
    doc = _doc_with_cells()
    doc["pages"][0]["confidence"][1][1][4] = 20.0     # the first vehicle's count
    (record,), _ = records_from_list(doc)
    assert record["affected_units"] is None and "vehicles[0].units" in record["extra"]["unreadable"]


def test_unreadable_ocr_notification_number_is_rejected_not_invented():
    doc = _doc_with_cells()
    doc["pages"][0]["tables"][0][0][1] = "45?6"
    records, rejected = records_from_list(doc)
    assert records == [] and "45?6" in rejected[0][1]


# ---- OCR'd scans ---------------------------------------------------------------------------------

def _numbers(record, want, date_key):
    """(field, read value, true value) of every number and date of a record."""
    out = [("recall_date", record["recall_date"], as_date(want[date_key])),
           ("affected_units", record["affected_units"], want["affected_units"])]
    for i, (got, true) in enumerate(zip(record["extra"]["vehicles"], want["vehicles"])):
        out.append((f"vehicles[{i}].units", got["units"], true["units"]))
    return out


@needs_ocr
@pytest.mark.slow
@pytest.mark.parametrize("name, date_key, press_date", [
    ("list_ducati_single", "recall_start_date", "2024-09-06"),
    ("list_small_batch", "notified_date", "2024-09-04"),
])
def test_ocr_numbers_are_exact_or_empty_and_flagged_never_wrong(name, date_key, press_date):
    records = records_of(f"{name}_scanned.pdf", press_date)
    want = {w["recall_number"]: w for w in EXPECTED[f"{name}.pdf"]}
    assert [r["recall_number"] for r in records] == list(want)
    read = 0
    for record in records:
        assert record["extra"]["read_method"] == "ocr"
        flags = record["extra"].get("unreadable", {})
        for field, got, true in _numbers(record, want[record["recall_number"]], date_key):
            if field == "recall_date" and date_key in flags:
                assert got == dt.date.fromisoformat(press_date)   # unreadable: the press date, flagged
            elif got is None:
                assert field in flags, (record["recall_number"], field, flags)
            else:
                assert got == true, (record["recall_number"], field)
                read += 1
    assert read >= len(records)   # most numbers are read, not just flagged


# ---- whole runs ------------------------------------------------------------------------------------

def _replay_transport(overrides: dict | None = None):
    from basecrawler.fetch.replay import ReplayTransport

    replay = ReplayTransport(REPO / "fixtures" / "replay")
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if overrides and request.url.path in overrides:
            return overrides[request.url.path](request)
        return replay.handle_request(request)

    transport = httpx.MockTransport(handler)
    transport.seen = seen
    return transport


def test_incremental_run_takes_only_feed_items_since_the_window(store, settings):
    transport = _replay_transport()
    crawler = JpCrawler(store, settings=settings, transport=transport, since=dt.date(2024, 9, 5))
    result = crawler.run()
    assert result.status == "succeeded"
    pages = [p for p in transport.seen if p.endswith(".html")]
    assert pages == ["/report/press/jidosha08_hh_005221.html", "/report/press/jidosha08_hh_005222.html"]
    assert {r["recall_number"] for r in store.query("SELECT recall_number FROM recalls")} == {"外-3456", "4526"}


def test_full_run_stores_every_recall_of_every_press_release(store, settings):
    transport = _replay_transport(
        # keep this run free of OCR: serve the text copy of the scanned small-batch list
        {"/report/press/content/001761650.pdf":
         lambda r: httpx.Response(200, content=(FIXTURES / "list_small_batch.pdf").read_bytes())})
    result = JpCrawler(store, settings=settings, transport=transport, mode="full").run()
    assert result.status == "succeeded", result.error
    numbers = {r["recall_number"] for r in store.query("SELECT recall_number FROM recalls")}
    assert numbers == {"外-3456", "4526", "4498", "外-3471", "5402", "外-3478", "5415"}
    honda = store.lookup.get("vehicle_recall", {"country": "JP", "recall_number": "4526"})
    assert honda["affected_units"] == 12313 and honda["recall_date"] == "2024-09-06"
    assert honda["source_url"] == f"{SITE}/report/press/jidosha08_hh_005222.html"
    assert honda["source_lang"] == "ja" and honda["country"] == "JP"
    manifest = store.query("SELECT state FROM artifacts WHERE source = 'jp'")
    assert [m["state"] for m in manifest] == ["complete"] * 4


def test_unreadable_pdf_is_a_dead_letter_and_the_other_items_go_on(store, settings):
    error_page = b"<!DOCTYPE html><html><body>Service Unavailable</body></html>"
    transport = _replay_transport(
        {"/report/press/content/001761787.pdf": lambda r: httpx.Response(200, content=error_page,
                                                                          headers={"Content-Type": "application/pdf"})})
    result = JpCrawler(store, settings=settings, transport=transport, since=dt.date(2024, 9, 5)).run()
    assert result.counts.dead_lettered == 1
    letter = store.dead_letters.open_dead_letters("jp")[0]
    assert letter["url"] == f"{SITE}/report/press/content/001761787.pdf" and "corrupt" in letter["error"]
    assert store.lookup.get("vehicle_recall", {"country": "JP", "recall_number": "4526"}) is not None and store.lookup.get("vehicle_recall", {"country": "JP", "recall_number": "外-3456"}) is None


def test_pdf_that_downloads_whole_but_cannot_be_read_is_a_dead_letter_with_its_body(store, settings):
    broken = b"%PDF-1.4\n" + b"garbage " * 200 + b"\n%%EOF\n"
    transport = _replay_transport(
        {"/report/press/content/001761787.pdf": lambda r: httpx.Response(200, content=broken)})
    result = JpCrawler(store, settings=settings, transport=transport, since=dt.date(2024, 9, 5)).run()
    assert result.counts.dead_lettered == 1
    letter = store.dead_letters.open_dead_letters("jp")[0]
    import hashlib
    assert letter["response_sha256"] == hashlib.sha256(broken).hexdigest()
    assert store.lookup.get("vehicle_recall", {"country": "JP", "recall_number": "4526"}) is not None


def test_replay_run_from_the_command_line_works_offline(tmp_path):
    db = tmp_path / "jp.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BASECRAWLER_")}
    env.update({"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"})  # no way out
    done = subprocess.run([sys.executable, "-m", "basecrawler", "--db", str(db), "run", "--source", "jp",
                           "--mode", "full", "--replay", "fixtures/replay"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "jp: fetched 4" in done.stderr
    from basecrawler import Store
    store = Store(str(db))
    try:
        assert store.lookup.count("vehicle_recall", "jp") >= 3
    finally:
        store.close()


@needs_ocr
def test_scan_unreadable_without_tesseract_is_resolved_by_dead_letter_retry(store, settings, monkeypatch):
    import pytesseract

    real_command = pytesseract.pytesseract.tesseract_cmd
    monkeypatch.setattr(pytesseract.pytesseract, "tesseract_cmd", "/nonexistent/tesseract")
    crawler = JpCrawler(store, settings=settings, transport=_replay_transport(), mode="full")
    result = crawler.run()
    letter = next(l for l in store.dead_letters.open_dead_letters("jp") if "tesseract-ocr-jpn" in l["error"])
    assert letter["url"].endswith("/001761650.pdf") and store.lookup.get("vehicle_recall", {"country": "JP", "recall_number": "5402"}) is None
    assert result.counts.saved == 3     # the three text PDFs were stored all the same

    monkeypatch.setattr(pytesseract.pytesseract, "tesseract_cmd", real_command)
    outcome = JpCrawler(store, settings=settings).retry_dead_letters()
    assert outcome["resolved"] == 1
    assert store.lookup.get("vehicle_recall", {"country": "JP", "recall_number": "5402"})["affected_units"] == 58


def test_incremental_run_keeps_small_batch_rows_notified_weeks_before_publication(store, settings):
    JpCrawler(store, settings=settings, transport=_replay_transport(
        {"/report/press/content/001761650.pdf":
         lambda r: httpx.Response(200, content=(FIXTURES / "list_small_batch.pdf").read_bytes())}), mode="full").run()
    store.write(lambda db: db.conn.execute("DELETE FROM recalls WHERE recall_number = '外-3471'"))
    result = JpCrawler(store, settings=settings, transport=_replay_transport(
        {"/report/press/content/001761650.pdf":
         lambda r: httpx.Response(200, content=(FIXTURES / "list_small_batch.pdf").read_bytes())})).run()
    # newest stored recall is 2024-09-07; 外-3471 was notified 2024-08-02 and published 2024-09-04
    assert result.counts.new == 1 and store.lookup.get("vehicle_recall", {"country": "JP", "recall_number": "外-3471"}) is not None


def test_list_pdf_without_a_recognisable_table_is_a_dead_letter_not_silence(store, settings):
    import io

    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    page = canvas.Canvas(buffer)
    page.drawString(72, 720, "Improvement diagram only, no table")
    page.save()
    transport = _replay_transport(
        {"/report/press/content/001761787.pdf": lambda r: httpx.Response(200, content=buffer.getvalue())})
    result = JpCrawler(store, settings=settings, transport=transport, since=dt.date(2024, 9, 5)).run()
    assert result.counts.unparseable == 1
    letter = store.dead_letters.open_dead_letters("jp")[0]
    assert "no recall table" in letter["error"] and letter["stage"] == "parse"
