"""sources/au.py: vehiclerecalls.gov.au listings and Drupal detail pages (fixtures in fixtures/au/)."""
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from sources.au import AustraliaCrawler, parse_detail

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "au"


@pytest.fixture(autouse=True)
def fast_host(monkeypatch, _clean_env):
    # The source's polite 1 request/s would make every test wait; the per-source rate
    # setting is the documented way to change it.
    monkeypatch.setenv("BASECRAWLER_AU_RATE", "1000")


def page(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


class Site:
    """Serves the fixture site; `listing` maps page number → fixture file, `fail` maps a
    path to a status code. Every requested path (with query) is kept in `requested`."""

    def __init__(self, listing=None, fail=None):
        self.listing = listing or {0: "listing_page_0.html", 1: "listing_page_1.html", 2: "listing_page_2.html"}
        self.fail = fail or {}
        self.requested: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        target = request.url.raw_path.decode()
        self.requested.append(target)
        if request.url.path in self.fail:
            return httpx.Response(self.fail[request.url.path], text="<html><body>Not found</body></html>")
        if request.url.path == "/recalls/browse-all-recalls":
            number = int(request.url.params.get("page", "0"))
            name = self.listing.get(number, self.listing.get("rest"))
            if name is None:
                return httpx.Response(404, text="<html><body>Not found</body></html>")
            return httpx.Response(200, text=page(name), headers={"content-type": "text/html; charset=UTF-8"})
        detail = FIXTURES / (request.url.path.rsplit("/", 1)[-1] + ".html")
        if detail.exists():
            return httpx.Response(200, text=detail.read_text(encoding="utf-8"),
                                  headers={"content-type": "text/html; charset=UTF-8"})
        return httpx.Response(404, text="<html><body>Not found</body></html>")


def crawl(store, settings, site: Site, mode="full"):
    return AustraliaCrawler(store, settings=settings, transport=httpx.MockTransport(site), mode=mode).run()


def test_detail_page_fields_map_to_the_recall(store, settings):
    crawl(store, settings, Site())
    row = store.lookup.get("vehicle_recall", {"country": "AU", "recall_number": "REC-006046"})
    assert row["recall_date"] == "2024-06-20"
    assert row["manufacturer_original"] == "Toyota"
    assert row["model_original"] == "Corolla, Corolla Hatch"
    assert row["model_year"] == "2017-2019"
    assert row["defect_cause_original"].startswith("The fuel pump on affected vehicles may fail")
    assert row["remedy_original"].startswith("Toyota will contact owners in writing")
    assert row["source_url"] == "https://www.vehiclerecalls.gov.au/recalls/rec-006046"
    assert row["extra"]["product_category"] == "Vehicles / Passenger vehicles"


def test_nested_field_divs_parse_fully():
    record = parse_detail(page("rec-006046.html"))
    # Text after an inner </div> belongs to the same field item and must not be cut off.
    assert record["defect_cause_original"] == (
        "The fuel pump on affected vehicles may fail due to a manufacturing fault.\n"
        "Affected vehicles were supplied between 2017 and 2019.\n"
        "Check the VIN list to see whether your vehicle is affected.")
    assert record["remedy_original"].endswith("\nOwners can check their VIN on the manufacturer's website.")


def test_unmapped_fields_are_kept_in_extra_under_their_label():
    record = parse_detail(page("rec-006046.html"))
    assert record["extra"]["fields"]["Supplier"] == "Toyota Australia Pty Ltd"


def test_full_run_reads_listing_pages_until_one_brings_no_new_ids(store, settings):
    site = Site()
    result = crawl(store, settings, site)
    assert result.status == "succeeded" and result.counts.new == 23
    listings = [p for p in site.requested if "browse-all-recalls" in p]
    assert listings == [f"/recalls/browse-all-recalls?page={n}" for n in range(3)]


def test_listing_that_repeats_its_last_page_ends_the_crawl(store, settings):
    # Some Drupal views serve the last page again for any page number past the end.
    site = Site(listing={0: "listing_page_0.html", "rest": "listing_page_1.html"})
    result = crawl(store, settings, site)
    assert result.counts.new == 23
    assert "/recalls/browse-all-recalls?page=3" not in site.requested


def test_listing_without_recall_links_makes_a_full_run_suspect(store, settings):
    site = Site(listing={0: "listing_layout_changed.html", 1: "listing_layout_changed.html"})
    result = crawl(store, settings, site)
    assert result.status == "suspect"
    assert store.runs.last_run("au")["status"] == "suspect"


def test_failing_detail_page_is_dead_lettered_and_the_rest_stored(store, settings):
    site = Site(fail={"/recalls/rec-006040": 404})
    result = crawl(store, settings, site)
    assert result.status == "succeeded"
    assert result.counts.saved == 22 and result.counts.dead_lettered == 1
    letter = store.dead_letters.open_dead_letters("au")[0]
    assert letter["record_key"] == "REC-006040" and letter["url"].endswith("/recalls/rec-006040")
    assert store.lookup.get("vehicle_recall", {"country": "AU", "recall_number": "REC-006039"}) is not None


def test_incremental_stops_at_the_first_page_with_only_known_older_records(store, settings):
    crawl(store, settings, Site())
    store.write(lambda db: db.conn.execute(
        "DELETE FROM recalls WHERE recall_number IN ('REC-006046', 'REC-006045')"))
    site = Site()
    result = crawl(store, settings, site, mode="incremental")
    assert store.lookup.get("vehicle_recall", {"country": "AU", "recall_number": "REC-006046"}) is not None and result.counts.new == 2
    assert "/recalls/browse-all-recalls?page=1" in site.requested       # page 0 still had new records
    assert "/recalls/browse-all-recalls?page=2" not in site.requested   # page 1: all known and older
    assert "/recalls/rec-006030" not in site.requested                  # known, older: not fetched again


def test_source_declares_a_slower_host_rate(store, settings, monkeypatch):
    monkeypatch.delenv("BASECRAWLER_AU_RATE")
    crawler = AustraliaCrawler(store, settings=settings)
    assert (crawler.http.rate_per_s, crawler.http.concurrency) == (1.0, 1)
    crawler.http.close()


def test_replay_run_works_offline_via_the_cli(tmp_path):
    db = tmp_path / "replay.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BASECRAWLER_")}
    env["BASECRAWLER_AU_RATE"] = "1000"
    proc = subprocess.run(
        [sys.executable, "-m", "basecrawler", "--db", str(db), "run", "--source", "au", "--replay", "fixtures/replay"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "au: fetched 23 → parsed 23" in proc.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM recalls WHERE country = 'AU'").fetchone()[0] == 23


def test_a_listing_row_whose_link_cannot_be_read_is_a_dead_letter_and_the_rest_stored(store, settings):
    # The HTML parser recovers silently from a broken row: the row must still end as a letter.
    broken = page("listing_page_0.html").replace('href="/recalls/rec-006046"', 'href="/recalls/rec-006O46"')
    assert broken != page("listing_page_0.html")

    class BrokenRowSite(Site):
        def __call__(self, request):
            if request.url.path == "/recalls/browse-all-recalls" and request.url.params.get("page", "0") == "0":
                self.requested.append(request.url.raw_path.decode())
                return httpx.Response(200, text=broken, headers={"content-type": "text/html; charset=UTF-8"})
            return super().__call__(request)

    result = crawl(store, settings, BrokenRowSite())
    letters = store.dead_letters.open_dead_letters("au")
    lost = [letter for letter in letters if letter["kind"] == "unreadable_item"]
    assert len(lost) == 1 and "rec-006O46" in lost[0]["raw"]
    assert store.lookup.get("vehicle_recall", {"country": "AU", "recall_number": "REC-006045"}) is not None      # the rows around it are stored
    assert store.lookup.get("vehicle_recall", {"country": "AU", "recall_number": "REC-006046"}) is None
    assert result.counts.dead_lettered >= 1
