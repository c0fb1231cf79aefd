"""A bad-input corpus for every parser, served over real HTTP in place of one exchange of the
replay set. Each bad input gets a clear error or a dead letter — never a crash of the run and
never a wrong value stored (every stored row equals the clean run's row for that recall)."""
import csv
import io
import re

import pytest

from basecrawler import Store
from basecrawler.pipeline.registry import discover
from basecrawler.testing import LoopbackServer, Reply, fast_settings

from support import encrypted_pdf

from .universe import without_hosts, ReplayHandler, clean_reference, point_source_at, records

HTML_ERROR_PAGE = b"<!DOCTYPE html><html><head><title>Error</title></head><body><h1>Service temporarily unavailable</h1></body></html>"
XXE = (b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
       b"<Safety-Gate><weeklyReport><reference>&x;</reference></weeklyReport></Safety-Gate>")
LAUGHS = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
          + b"".join(b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10) for i in range(1, 10))
          + b']><Safety-Gate><report_date>&lol9;</report_date></Safety-Gate>')


class Substitute:
    """The replay set, except requests whose path matches `pattern` get `reply`."""

    def __init__(self, pattern: str, reply: Reply):
        self.replay = ReplayHandler()
        self.pattern = re.compile(pattern)
        self.reply = reply
        self.hits = 0

    def __call__(self, request):
        if self.pattern.search(request.path):
            self.hits += 1
            return self.reply
        return self.replay(request)


def run_against(tmp_path, monkeypatch, source_id, handler, runs=1):
    crawler_class = discover()[source_id]
    db = str(tmp_path / "bad.db")
    store = Store(db)
    with LoopbackServer(handler) as server:
        point_source_at(monkeypatch, crawler_class, server.url)
        results = [crawler_class(store, settings=fast_settings(db, max_retries=1), mode="full").run() for _ in range(runs)]
    return store, results


def assert_nothing_wrong_stored(store, reference, source_id):
    """Every stored value is the clean run's value; a value may be missing (a detail or a
    report that could not be read), never different. `extra` holds per-report bookkeeping
    (which weekly report an alert came from) and is left out."""
    for key, row in records(store, source_id).items():
        assert key in reference, f"{key} is not a record of the source"
        clean = without_hosts(reference[key])
        for column, value in without_hosts(row).items():
            if column == "extra" or value is None:
                continue
            assert value == clean[column], f"{key}.{column}: a wrong value was stored"


def assert_clear_error_or_dead_letter(store, result, source_id):
    letters = store.dead_letters.open_dead_letters(source_id)
    assert result.status in ("failed", "suspect") or letters, "a bad input went unnoticed"
    if result.status == "failed":
        assert result.error and len(result.error) > 20


CASES = [
    ("us", r"/resource/", Reply(200, body=b'[{"nhtsa_id": "24V70', headers={"Content-Type": "application/json"})),
    ("us", r"/resource/", Reply(200, body=HTML_ERROR_PAGE, headers={"Content-Type": "text/html"})),
    ("us", r"campaignNumber=24V701000", Reply(200, body=HTML_ERROR_PAGE, headers={"Content-Type": "text/html"})),
    ("us", r"campaignNumber=24V701000", Reply(200, body=b'{"Count": 3, "results": [{"Make": "FO', headers={"Content-Type": "application/json"})),
    ("ca", r"\.csv", Reply(200, body=HTML_ERROR_PAGE, headers={"Content-Type": "text/html"})),
    ("au", r"browse-all-recalls\?page=0", Reply(200, body=HTML_ERROR_PAGE, headers={"Content-Type": "text/html"})),
    ("au", r"/recalls/rec-", Reply(200, body=HTML_ERROR_PAGE, headers={"Content-Type": "text/html"})),
    ("eu", r"/list/xml/", Reply(200, body=HTML_ERROR_PAGE, headers={"Content-Type": "text/html"})),
    ("eu", r"/list/xml/", Reply(200, body=XXE, headers={"Content-Type": "application/xml"})),
    ("eu", r"/detail/xml/10000205", Reply(200, body=LAUGHS, headers={"Content-Type": "application/xml"})),
    ("eu", r"/detail/xml/10000205", Reply(200, body=b"<?xml version='1.0'?><Safety-Gate><report_date>2", headers={"Content-Type": "application/xml"})),
    ("jp", r"pressrelease\.rdf", Reply(200, body=HTML_ERROR_PAGE, headers={"Content-Type": "text/html"})),
    ("jp", r"pressrelease\.rdf", Reply(200, body=XXE, headers={"Content-Type": "application/rdf+xml"})),
    ("jp", r"001761650\.pdf", Reply(200, body=HTML_ERROR_PAGE, headers={"Content-Type": "application/pdf"})),
    ("jp", r"001761650\.pdf", Reply(200, body=b"", headers={"Content-Type": "application/pdf"})),
    ("jp", r"001761650\.pdf", Reply(200, body=b"%PDF-1.4\n1 0 obj<<>>endobj\n", headers={"Content-Type": "application/pdf"})),
    ("jp", r"001761650\.pdf", Reply(200, body=encrypted_pdf(), headers={"Content-Type": "application/pdf"})),
]


@pytest.mark.parametrize("source_id, pattern, reply", CASES,
                         ids=[f"{s}-{i}" for i, (s, _, _) in enumerate(CASES)])
def test_bad_input_is_a_clear_error_or_dead_letter_never_a_wrong_value(tmp_path, monkeypatch, source_id, pattern, reply):
    reference = clean_reference(tmp_path, source_id)
    handler = Substitute(pattern, reply)
    store, results = run_against(tmp_path, monkeypatch, source_id, handler)
    assert handler.hits, "the bad input was never requested"
    assert_clear_error_or_dead_letter(store, results[-1], source_id)
    assert_nothing_wrong_stored(store, reference, source_id)
    assert "root:x:0:0" not in str(store.query("SELECT * FROM recalls")) + str(store.dead_letters.open_dead_letters(source_id))
    store.close()


def test_shift_jis_feed_served_as_utf8_is_read_as_shift_jis_not_mojibake(tmp_path, monkeypatch):
    """The replay feed (Shift_JIS bytes) with a header that says UTF-8. Before #13 it was
    refused (or, read as UTF-8, would have been mojibake); now the bytes decide: the feed is
    read as Shift_JIS, with a warning, and every recall of the clean run is stored with its
    clean values and no replacement character."""
    reference = clean_reference(tmp_path, "jp")
    replay = ReplayHandler()

    def handler(request):
        reply = replay(request)
        if "pressrelease.rdf" in request.path:
            return Reply(200, body=reply.body, headers={"Content-Type": "application/rdf+xml; charset=utf-8"})
        return reply

    store, results = run_against(tmp_path, monkeypatch, "jp", handler)
    assert results[-1].status == "succeeded", results[-1].error
    assert any("not valid utf-8; read as cp932" in w for w in results[-1].warnings), results[-1].warnings
    assert set(records(store, "jp")) == set(reference)
    assert_nothing_wrong_stored(store, reference, "jp")
    texts = str(store.query("SELECT * FROM recalls"))
    assert "\ufffd" not in texts  # no replacement characters stored


# ---- Transport Canada CSV: a corpus of row-level damage -------------------------------
def ca_csv_rows():
    body = ReplayHandler()(type("R", (), {"method": "GET", "path": "/vrdb_full_monthly.csv"})()).body
    reader = csv.reader(io.StringIO(body.decode("utf-8")))
    return next(reader), list(reader)


def serve_csv(header, rows) -> Substitute:
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\r\n")
    writer.writerow(header)
    writer.writerows(rows)
    return Substitute(r"\.csv", Reply(200, body=out.getvalue().encode("utf-8"), headers={"Content-Type": "text/csv"}))


def test_csv_missing_a_column_fails_clearly_and_stores_nothing_shifted(tmp_path, monkeypatch):
    reference = clean_reference(tmp_path, "ca")
    header, rows = ca_csv_rows()
    drop = header.index("MODEL_NAME_NM")
    store, results = run_against(tmp_path, monkeypatch, "ca", serve_csv(
        header[:drop] + header[drop + 1:], [r[:drop] + r[drop + 1:] for r in rows]))
    assert results[0].status == "failed" and "MODEL_NAME_NM" in results[0].error
    assert_nothing_wrong_stored(store, reference, "ca")


def test_csv_with_an_extra_column_still_parses_every_record(tmp_path, monkeypatch):
    reference = clean_reference(tmp_path, "ca")
    header, rows = ca_csv_rows()
    store, results = run_against(tmp_path, monkeypatch, "ca", serve_csv(
        header[:3] + ["NEW_COLUMN"] + header[3:], [r[:3] + ["surprise"] + r[3:] for r in rows]))
    assert results[0].status == "succeeded"
    assert set(records(store, "ca")) == set(reference)
    assert_nothing_wrong_stored(store, reference, "ca")


def test_csv_impossible_date_huge_field_and_control_characters(tmp_path, monkeypatch):
    header, rows = ca_csv_rows()
    number, date, comment = (header.index(c) for c in ("RECALL_NUMBER_NUM", "RECALL_DATE_DTE", "COMMENT_ETXT"))
    numbers = list(dict.fromkeys(r[number] for r in rows))
    bad_date, huge, control = numbers[0], numbers[1], numbers[2]
    for row in rows:
        if row[number] == bad_date:
            row[date] = "31/02/2024"
        elif row[number] == huge:
            row[comment] = "Issue: " + "x" * 10_000_000
        elif row[number] == control:
            row[comment] = "Issue: brake\x00 fluid\x1b leak"
    store, results = run_against(tmp_path, monkeypatch, "ca", serve_csv(header, rows))
    assert results[0].status == "succeeded"
    dated = store.lookup.get("vehicle_recall", {"country": "CA", "recall_number": bad_date})
    assert dated["date_unknown"] == 1 and dated["recall_date"] == "1970-01-01"  # never 2024-03-02
    assert store.lookup.get("vehicle_recall", {"country": "CA", "recall_number": huge}) is None
    assert any(l["record_key"] == huge or huge in (l["raw"] or "")[:200] for l in store.dead_letters.open_dead_letters("ca"))
    assert "\x00" not in store.lookup.get("vehicle_recall", {"country": "CA", "recall_number": control})["summary_original"]
    assert "brake fluid leak" in store.lookup.get("vehicle_recall", {"country": "CA", "recall_number": control})["summary_original"]
