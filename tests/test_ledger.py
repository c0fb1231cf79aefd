"""Issue #13 point 4: "not yet collected" beats the date window.

A list item (EU weekly report, MLIT press release, AU recall) whose fetch failed is fetched
again by the next incremental run whatever its date, until it is done or given up after
BASECRAWLER_LEDGER_MAX_ATTEMPTS; `status` shows the ledger. Every run goes through the CLI
against a loopback server; the expected values are read off the payloads written below.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

from basecrawler import Store
from basecrawler.testing import LoopbackServer, Reply

REPO = Path(__file__).resolve().parent.parent
AU_FIXTURES = REPO / "fixtures" / "au"


def cli(db, *args, env=None):
    base = {k: v for k, v in os.environ.items() if not k.startswith("BASECRAWLER_")}
    base.update({"BASECRAWLER_HTTP_RETRIES": "1", "BASECRAWLER_HTTP_BACKOFF": "0.01",
                 "BASECRAWLER_EU_RATE": "1000", "BASECRAWLER_JP_RATE": "1000", "BASECRAWLER_AU_RATE": "1000"})
    base.update(env or {})
    done = subprocess.run([sys.executable, "-m", "basecrawler", "--db", str(db), *args],
                          cwd=REPO, env=base, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    return done


def ledger_rows(db, source):
    store = Store(str(db))
    try:
        return {r["key"]: r for r in store.query("SELECT * FROM list_ledger WHERE source = ?", [source])}
    finally:
        store.close()


def recall(db, country, number):
    store = Store(str(db))
    try:
        return store.lookup.get("vehicle_recall", {"country": country.upper(), "recall_number": number})
    finally:
        store.close()


def dead_letters(db, source):
    store = Store(str(db))
    try:
        return store.query("SELECT kind, stage, url, error, resolved_at FROM dead_letters WHERE source = ? ORDER BY id",
                           [source])
    finally:
        store.close()


# ---- EU: a weekly report whose download failed -------------------------------------------------
def eu_index(*entries):
    """entries: (report id, publication date dd/mm/yyyy)."""
    items = "".join(
        f"<weeklyReport><reference>Report-{rid}</reference><publicationDate>{date}</publicationDate>"
        f"<URL>https://ec.europa.eu/safety-gate-alerts/api/download/weeklyReport/detail/xml/{rid}?language=en</URL>"
        "</weeklyReport>" for rid, date in entries)
    return f'<?xml version="1.0" encoding="UTF-8"?><Safety-Gate>{items}</Safety-Gate>'.encode()


def eu_report(date, case, brand, name):
    return (f'<?xml version="1.0" encoding="UTF-8"?><Safety-Gate><report_date>{date}</report_date>'
            f"<notifications><caseNumber>{case}</caseNumber><category>Motor vehicles</category>"
            f"<brand>{brand}</brand><name>{name}</name><description>Passenger car.</description>"
            "</notifications></Safety-Gate>").encode()


class EuSite:
    """The index and reports of the moment; `failing` report ids answer 500."""

    def __init__(self):
        self.index = b""
        self.reports: dict[str, bytes] = {}
        self.failing: set[str] = set()
        self.requested: list[str] = []

    def __call__(self, request):
        if "/weeklyReport/list/" in request.path:
            return Reply(200, self.index, {"Content-Type": "application/xml"})
        rid = request.path.split("/detail/xml/")[1].split("?")[0]
        self.requested.append(rid)
        if rid in self.failing or rid not in self.reports:
            return Reply(500, b"Internal Server Error", {"Content-Type": "text/plain"})
        return Reply(200, self.reports[rid], {"Content-Type": "application/xml"})


REPORT_501 = eu_report("24/07/2026", "SR/07001/26", "Skoda", "Octavia")
REPORT_502 = eu_report("14/08/2026", "SR/07002/26", "Seat", "Leon")
REPORT_503 = eu_report("25/09/2026", "SR/07003/26", "Opel", "Corsa")


def fail_report_501(site: "EuSite") -> None:
    """The index lists 502 (14/08) and 501 (24/07); 501 answers 500, 502 is served."""
    site.index = eu_index(("502", "14/08/2026"), ("501", "24/07/2026"))
    site.reports = {"501": REPORT_501, "502": REPORT_502}
    site.failing = {"501"}


def test_eu_report_that_failed_is_fetched_again_whatever_its_date(tmp_path):
    db = tmp_path / "eu.db"
    site = EuSite()
    with LoopbackServer(site) as server:
        env = {"BASECRAWLER_EU_SITE_URL": server.url}
        # Run 1: report 501 (24/07) answers 500; report 502 (14/08) is stored.
        fail_report_501(site)
        first = cli(db, "run", "--source", "eu", env=env)
        assert first.returncode == 0, first.stderr
        assert recall(db, "EU", "SR/07001/26") is None
        assert [(d["kind"], d["stage"]) for d in dead_letters(db, "eu")] == [("transient", "fetch")]
        rows = ledger_rows(db, "eu")
        assert (rows["501"]["state"], rows["501"]["attempts"]) == ("failing", 1)
        assert (rows["502"]["state"], rows["502"]["attempts"]) == ("done", 1)

        # Run 2, incremental, with a newer report 503 (25/09) in the index: the newest stored
        # date is 14/08/2026, so the window starts on 31/07/2026 (14-day overlap); report 501
        # of 24/07 is before it but was never collected: fetched again and its record stored.
        site.index = eu_index(("503", "25/09/2026"), ("502", "14/08/2026"), ("501", "24/07/2026"))
        site.reports["503"] = REPORT_503
        site.failing = set()
        site.requested.clear()
        second = cli(db, "run", "--source", "eu", env=env)
        assert second.returncode == 0, second.stderr
        assert sorted(site.requested) == ["501", "502", "503"]
        octavia = recall(db, "EU", "SR/07001/26")
        assert octavia is not None
        assert (octavia["recall_date"], octavia["manufacturer_original"], octavia["model_original"]) == \
            ("2026-07-24", "Skoda", "Octavia")
        assert recall(db, "EU", "SR/07003/26")["recall_date"] == "2026-09-25"
        rows = ledger_rows(db, "eu")
        assert {k: (r["state"], r["attempts"]) for k, r in rows.items()} == \
            {"501": ("done", 2), "502": ("done", 2), "503": ("done", 1)}
        assert "fetched again whatever their date: 501" in second.stderr
        # The letter of the failed download is resolved: what it lost is stored now.
        assert [(d["kind"], d["resolved_at"] is not None) for d in dead_letters(db, "eu")] == [("transient", True)]

        status = json.loads(cli(db, "status", "--json").stdout)
        assert status["sources"]["eu"]["ledger"] == {"listed": 0, "done": 3, "failing": 0, "given_up": 0}


def test_eu_report_given_up_after_max_attempts_and_requeued_by_a_full_run(tmp_path):
    db = tmp_path / "eu.db"
    site = EuSite()
    with LoopbackServer(site) as server:
        env = {"BASECRAWLER_EU_SITE_URL": server.url, "BASECRAWLER_LEDGER_MAX_ATTEMPTS": "2"}
        fail_report_501(site)
        cli(db, "run", "--source", "eu", env=env)
        cli(db, "run", "--source", "eu", env=env)          # attempt 2 of 2: given up
        rows = ledger_rows(db, "eu")
        assert (rows["501"]["state"], rows["501"]["attempts"]) == ("given_up", 2)
        assert "Transient" in rows["501"]["last_error"]

        site.requested.clear()
        third = cli(db, "run", "--source", "eu", env=env)  # incremental: leaves it alone
        assert site.requested == ["502"]                   # 502 is inside the window
        status_text = cli(db, "status", "--lang", "en").stdout
        assert "list items listed 0, done 1, failing 0, given up 1" in status_text
        assert third.returncode == 0

        # A full run re-queues given-up items: the server has recovered, the report is stored.
        site.failing = set()
        full = cli(db, "run", "--source", "eu", "--mode", "full", env=env)
        assert full.returncode == 0, full.stderr
        assert "501" in site.requested
        assert recall(db, "EU", "SR/07001/26")["model_original"] == "Octavia"
        assert (ledger_rows(db, "eu")["501"]["state"]) == "done"
        # Every failed attempt's letter (two before the give-up) is resolved.
        assert [d["resolved_at"] is not None for d in dead_letters(db, "eu")] == [True, True]


def test_explicit_window_does_not_pull_in_failed_items(tmp_path):
    db = tmp_path / "eu.db"
    site = EuSite()
    with LoopbackServer(site) as server:
        env = {"BASECRAWLER_EU_SITE_URL": server.url}
        fail_report_501(site)
        cli(db, "run", "--source", "eu", env=env)
        site.failing = set()
        site.requested.clear()
        cli(db, "run", "--source", "eu", "--since", "2026-08-01", env=env)
        assert site.requested == ["502"]
        assert ledger_rows(db, "eu")["501"]["state"] == "failing"


# ---- JP: a press page that answered 404, then scrolled out of the feed --------------------------
def jp_feed(*items):
    """items: (press page name, date yyyy-mm-dd, title)."""
    body = "".join(
        f'<item rdf:about="http://www.mlit.go.jp/report/press/{name}.html"><title>{title}</title>'
        f"<link>http://www.mlit.go.jp/report/press/{name}.html</link><dc:date>{date}</dc:date></item>"
        for name, date, title in items)
    return ('<?xml version="1.0" encoding="UTF-8"?><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
            'xmlns="http://purl.org/rss/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/">'
            f"{body}</rdf:RDF>").encode()


def jp_press_page(title, era_date, pdf_href):
    return ('<html><head><meta http-equiv="Content-Type" content="text/html; charset=UTF-8"/></head>'
            f'<body><h2 class="title">{title}</h2><p class="date mb20">{era_date}</p>'
            f'<p class="linkArrow01 mb10"><a href="{pdf_href}">リコール届出一覧表</a>（PDF形式：66KB）</p>'
            "</body></html>")


def test_jp_press_page_404_is_fetched_again_after_it_left_the_feed(tmp_path):
    honda_pdf = (REPO / "fixtures" / "jp" / "list_honda_single.pdf").read_bytes()
    suzuki_pdf = (REPO / "fixtures" / "jp" / "list_suzuki_single.pdf").read_bytes()
    state = {"feed": b"", "gone": {"/report/press/r_honda.html"}}
    title = "リコールの届出について（ホンダ　GB350　他）"
    pages = {
        "/report/press/r_honda.html": jp_press_page(title, "令和6年9月6日", "/report/press/content/honda.pdf"),
        "/report/press/r_suzuki.html": jp_press_page("リコールの届出について（スズキ　ジムニー）", "令和6年12月20日",
                                                     "/report/press/content/suzuki.pdf"),
    }
    requested = []

    def handler(request):
        requested.append(request.path)
        if request.path == "/pressrelease.rdf":
            return Reply(200, state["feed"], {"Content-Type": "application/rss+xml"})
        if request.path in state["gone"] or request.path not in pages and not request.path.endswith(".pdf"):
            return Reply(404, b"<html><body>Not Found</body></html>", {"Content-Type": "text/html"})
        if request.path.endswith(".pdf"):
            body = honda_pdf if "honda" in request.path else suzuki_pdf
            return Reply(200, body, {"Content-Type": "application/pdf"})
        return Reply(200, pages[request.path], {"Content-Type": "text/html; charset=UTF-8"})

    db = tmp_path / "jp.db"
    with LoopbackServer(handler) as server:
        env = {"BASECRAWLER_JP_SITE_URL": server.url}
        state["feed"] = jp_feed(("r_suzuki", "2024-12-20", "リコールの届出について（スズキ　ジムニー）"),
                                ("r_honda", "2024-09-06", title))
        first = cli(db, "run", "--source", "jp", env=env)
        assert first.returncode == 0, first.stderr
        assert recall(db, "JP", "4526") is None
        assert recall(db, "JP", "4498") is not None
        assert [(d["kind"], d["stage"]) for d in dead_letters(db, "jp")] == [("not_found", "fetch")]
        assert ledger_rows(db, "jp")["/report/press/r_honda.html"]["state"] == "failing"

        # Run 2: the Honda release scrolled out of the feed and its page is back.
        state["feed"] = jp_feed(("r_suzuki", "2024-12-20", "リコールの届出について（スズキ　ジムニー）"))
        state["gone"] = set()
        second = cli(db, "run", "--source", "jp", env=env)
        assert second.returncode == 0, second.stderr
        honda = recall(db, "JP", "4526")
        assert honda is not None
        assert honda["affected_units"] == 12313                  # 9972 + 2341 in the PDF
        assert honda["extra"]["notifier"] == "本田技研工業株式会社"
        assert ledger_rows(db, "jp")["/report/press/r_honda.html"]["state"] == "done"
        assert [(d["kind"], d["resolved_at"] is not None) for d in dead_letters(db, "jp")] == [("not_found", True)]


# ---- AU: a detail page that failed, beyond where an incremental walk stops ------------------------
def test_au_detail_page_that_failed_is_fetched_again(tmp_path):
    listing = (AU_FIXTURES / "listing_page_0.html").read_text(encoding="utf-8")
    import re
    numbers = [n.upper() for n in dict.fromkeys(re.findall(r"/recalls/(rec-\d+)", listing))]
    broken = numbers[-1]
    state = {"broken": {broken.lower()}}
    requested = []

    def handler(request):
        path = request.path
        if path.startswith("/recalls/browse-all-recalls"):
            page = int(path.rsplit("=", 1)[1])
            body = listing if page == 0 else "<html><body><p>No results</p></body></html>"
            return Reply(200, body, {"Content-Type": "text/html; charset=UTF-8"})
        number = path.rsplit("/", 1)[1]
        requested.append(number)
        if number in state["broken"]:
            return Reply(500, b"oops", {"Content-Type": "text/plain"})
        return Reply(200, (AU_FIXTURES / f"{number}.html").read_bytes(), {"Content-Type": "text/html; charset=UTF-8"})

    db = tmp_path / "au.db"
    with LoopbackServer(handler) as server:
        env = {"BASECRAWLER_AU_SITE_URL": server.url}
        first = cli(db, "run", "--source", "au", env=env)
        assert first.returncode == 0, first.stderr
        assert recall(db, "AU", broken) is None
        assert ledger_rows(db, "au")[broken]["state"] == "failing"

        state["broken"] = set()
        requested.clear()
        second = cli(db, "run", "--source", "au", env=env)
        assert second.returncode == 0, second.stderr
        assert broken.lower() in requested
        assert recall(db, "AU", broken) is not None
        assert ledger_rows(db, "au")[broken]["state"] == "done"


# ---- the ledger's own rules ---------------------------------------------------------------------
def test_ledger_attempt_rules(tmp_path):
    import pytest
    from basecrawler.errors import Blocked, Transient
    from basecrawler.pipeline.ledger import Ledger

    store = Store(str(tmp_path / "l.db"))
    ledger = Ledger(store, "xx", max_attempts=3)
    for key in ("a", "b", "c", "d"):
        ledger.list(key, url=f"https://example.org/{key}", listed_date="2026-01-0" + str(len(key)))
    with ledger.attempt("a"):
        pass
    assert ledger.counts()["done"] == 0            # done only once its records are stored
    ledger.commit()
    with pytest.raises(Transient):
        with ledger.attempt("b"):
            raise Transient("gave up after 1 retries: GET https://example.org/b → 503")
    with pytest.raises(Blocked):                   # the host's fault, not the item's: no attempt used
        with ledger.attempt("c"):
            raise Blocked("blocked by the server (403)")

    def stopped_early():                           # the pipeline stopped before the item ended
        with ledger.attempt("d"):
            yield 1
    items = stopped_early()
    next(items)
    items.close()
    rows = {r["key"]: r for r in store.query("SELECT * FROM list_ledger")}
    assert {k: (r["state"], r["attempts"]) for k, r in rows.items()} == {
        "a": ("done", 1), "b": ("failing", 1), "c": ("failing", 0), "d": ("listed", 0)}
    assert "503" in rows["b"]["last_error"]
    # Only not-yet-collected items come back, and those the run chose are not repeated.
    assert [item.key for item in Ledger(store, "xx").retries(chosen=["d"])] == ["b", "c"]
    assert Ledger(store, "xx", retries=False).retries() == []
    store.close()
