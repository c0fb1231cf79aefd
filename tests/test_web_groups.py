"""The web view and groups of publishers (basecrawler/reading/web/groups.py,
plugins/basecrawler_groups.py): a type's table shows each recall once (the group's primary
record, as `basecrawler search` does) with a switch to every copy ("모든 출처 보기"), a row
says how many other publishers carry it ("다른 출처 2"); a card lists the group's other records
and a copy's card links back to the primary. And "watch this search": the page's exact
`basecrawler watch add` command, checked by running it.

Through Datasette's test client (in-process) and in real headless Chromium (as
tests/test_web_view.py), over a store that two republishers and one original publisher filled.
"""
from __future__ import annotations

import asyncio
import html
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import tempfile
import urllib.parse
from pathlib import Path

import pytest

from basecrawler import Republishes
from basecrawler.cli import main
import test_groups as groups_demo
from basecrawler.reading.browse import WEB_DIR, BrowseServer, build_metadata
from basecrawler.store.core import Store
from basecrawler.testing import fast_settings
from basecrawler.watch import repository
from web_fixture import free_port

pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Original(groups_demo.Original):
    """test_groups' original publisher, with a product and categories for the view to show."""

    def parse(self, ctx, raw):
        return {"alert_id": raw["nid"], "alert_date": raw.get("date", "2026-08-01"), "title_original": raw["title"],
                "product_original": raw["title"], "description_original": raw.get("text"),
                "category": raw.get("category", [])}


class Republisher(groups_demo.Republisher):
    def parse(self, ctx, raw):
        return {**super().parse(ctx, raw), "product_original": raw["title"]}


class Mirror(Republisher):
    source = "mirrordemo"
    republishes = (Republishes("origdemo", country="CA", field="alert_id"),)

    def parse(self, ctx, raw):
        return {**super().parse(ctx, raw), "alert_id": f"M-{raw['nid']}"}


def _crawl(cls, db_path, items):
    cls.items = items
    cls(db_path, mode="full", settings=fast_settings(db_path)).run()


@pytest.fixture(scope="module")
def grouped(tmp_path_factory):
    """Peanut butter: published by origdemo, republished by repubdemo and mirrordemo (a group of
    three); a kettle only by origdemo; a German alert only by repubdemo (no original: shown)."""
    db_path = str(tmp_path_factory.mktemp("groups") / "alerts.db")
    _crawl(Original, db_path, [{"nid": "82438", "title": "Peanut butter", "text": "Salmonella", "category": ["Food"]},
                               {"nid": "90001", "title": "Kettle", "date": "2026-07-01"}])
    _crawl(Republisher, db_path, [{"country": "CA", "nid": "82438", "title": "Peanut butter (OECD)"},
                                  {"country": "DE", "nid": "77", "title": "A German alert"}])
    _crawl(Mirror, db_path, [{"country": "CA", "nid": "82438", "title": "Peanut butter (mirror)"}])
    store = Store(db_path)
    try:
        ids = {(r["source"], r["alert_id"]): r["id"] for r in store.query("SELECT id, source, alert_id FROM product_alerts")}
    finally:
        store.close()
    return db_path, ids


def _copy_db(source: str, target) -> str:
    """A copy of the store with what its write-ahead log holds (a file copy may miss it)."""
    with sqlite3.connect(source) as conn, sqlite3.connect(str(target)) as copy:
        conn.backup(copy)
    return str(target)


def _client_pages(db_path: str, paths: list[str]) -> list:
    from datasette.app import Datasette

    async def fetch():
        ds = Datasette([db_path], metadata=build_metadata(db_path), plugins_dir=str(WEB_DIR / "plugins"),
                       template_dir=str(WEB_DIR / "templates"))
        return [await ds.client.get(path) for path in paths]
    return asyncio.run(fetch())


def _sources(response) -> list[str]:
    return sorted(row["source"] for row in response.json()["rows"])


def test_the_table_shows_each_recall_once_and_every_copy_on_request(grouped):
    db_path, ids = grouped
    once, every, page, every_page = _client_pages(db_path, [
        "/alerts/product_alerts.json?_shape=objects&_col=source",
        "/alerts/product_alerts.json?_shape=objects&_col=source&_bc_copies=1",
        "/alerts/product_alerts?_col=source&_col=alert_id&_col=title_ko",
        "/alerts/product_alerts?_col=source&_col=alert_id&_col=title_ko&_bc_copies=1"])
    assert _sources(once) == ["origdemo", "origdemo", "repubdemo"]            # the German alert has no original
    assert _sources(every) == ["mirrordemo", "origdemo", "origdemo", "repubdemo", "repubdemo"]
    text = page.text
    assert '<h3 class="bc-count">3건' in text and '<h3 class="bc-count">5건' in every_page.text
    assert "<title>제품 경보: 3건</title>" in text
    switch = re.search(r'<p class="bc-copies">(.*?)</p>', text, re.S).group(1)
    assert "다른 출처의 사본 2건" in switch and "모든 출처 보기" in switch
    assert "_bc_copies=1" in html.unescape(re.search(r'href="([^"]+)"', switch).group(1))
    back = re.search(r'<p class="bc-copies">(.*?)</p>', every_page.text, re.S).group(1)
    assert "리콜마다 한 번만 보기" in back and "_bc_copies" not in html.unescape(re.search(r'href="([^"]+)"', back).group(1))
    # The peanut butter row says two other publishers carry it; the kettle says nothing.
    rows = re.findall(r"<tr>.*?</tr>", text, re.S)
    peanut = next(r for r in rows if ">82438<" in r)
    kettle = next(r for r in rows if ">90001<" in r)
    assert '<span class="bc-other-sources">다른 출처 2</span>' in peanut
    assert "bc-other-sources" not in kettle
    # Every copy shown: each copy says the other two publishers; the German alert is in no group.
    rows = re.findall(r"<tr>.*?</tr>", every_page.text, re.S)
    for number in ("EN/CA/82438", "M-82438"):
        assert '<span class="bc-other-sources">다른 출처 2</span>' in next(r for r in rows if f">{number}<" in r)
    assert "bc-other-sources" not in next(r for r in rows if ">EN/DE/77<" in r)


def test_a_store_without_groups_shows_no_switch(tmp_path):
    db_path = str(tmp_path / "plain.db")
    _crawl(Original, db_path, [{"nid": "1", "title": "Kettle"}])
    (page,) = _client_pages(db_path, ["/plain/product_alerts?_col=alert_id&_col=title_ko"])
    assert page.status_code == 200 and "bc-copies" not in page.text and "bc-other-sources" not in page.text


def test_a_search_counts_and_shows_each_group_once(grouped):
    db_path, _ids = grouped
    once, every = _client_pages(db_path, ["/alerts/product_alerts.json?_shape=objects&_col=source&_search=peanut",
                                          "/alerts/product_alerts.json?_shape=objects&_col=source&_search=peanut"
                                          "&_bc_copies=1"])
    assert _sources(once) == ["origdemo"]
    assert _sources(every) == ["mirrordemo", "origdemo", "repubdemo"]
    (page,) = _client_pages(db_path, ["/alerts/product_alerts?_search=peanut&_col=title_ko"])
    found = re.search(r'<p class="bc-search-groups">(.*?)</p>', page.text, re.S).group(1)
    assert "제품 경보 1" in found


def test_a_card_lists_the_other_publishers_and_a_copy_links_back(grouped):
    db_path, ids = grouped
    primary, copy = ids[("origdemo", "82438")], ids[("repubdemo", "EN/CA/82438")]
    mirror, kettle = ids[("mirrordemo", "M-82438")], ids[("origdemo", "90001")]
    card, copy_card, plain = _client_pages(db_path, [f"/alerts/product_alerts/{primary}",
                                                     f"/alerts/product_alerts/{copy}",
                                                     f"/alerts/product_alerts/{kettle}"])
    group = re.search(r'<section class="bc-group">(.*?)</section>', card.text, re.S).group(1)
    assert "다른 출처에서도 발표됨" in group and "bc-copy-of" not in group
    assert f'href="/alerts/product_alerts/{copy}"' in group and "repubdemo" in group and "EN/CA/82438" in group
    assert f'href="/alerts/product_alerts/{mirror}"' in group and "M-82438" in group
    assert f'/alerts/product_alerts/{primary}"' not in group
    copied = re.search(r'<section class="bc-group">(.*?)</section>', copy_card.text, re.S).group(1)
    back = re.search(r'<a class="bc-primary-link" href="([^"]+)">([^<]+)</a>', copied)
    assert back.group(1) == f"/alerts/product_alerts/{primary}" and "대표 기록으로 가기 (origdemo 82438)" in back.group(2)
    assert f'href="/alerts/product_alerts/{mirror}"' in copied                 # the group's other copy too
    assert "bc-group" not in plain.text


def _watch_command(page_text: str) -> str:
    """The command as the copy button copies it: the block's text."""
    block = re.search(r'<code id="bc-watch-command">(.*?)</code>', page_text, re.S).group(1)
    return html.unescape(re.sub(r"<[^>]+>", "", block))


def test_watch_this_search_gives_the_exact_command_and_it_makes_that_watch(grouped, tmp_path):
    db_path, _ids = grouped
    query = urllib.parse.urlencode([("_search", "땅콩 butter"), ("_bcf_category", "Food"), ("source", "origdemo"),
                                    ("country__exact", "CA"), ("alert_date__gte", "2026-01-01"), ("_sort", "id"),
                                    ("_col", "title_ko")])
    page, this = _client_pages(db_path, [f"/alerts/product_alerts?{query}",
                                         f"/-/watch-this?table=product_alerts&{query}"])
    command = _watch_command(page.text)
    assert command == _watch_command(this.text)
    copied = re.search(r'<button type="button" class="bc-copy"[^>]*data-command="([^"]*)"', page.text).group(1)
    assert html.unescape(copied) == command                         # what the copy button copies
    assert '<button type="button" class="bc-copy" data-copy="bc-watch-command"' in page.text
    assert "이 검색 감시하기" in page.text and "복사" in page.text
    # A condition a watch cannot hold is named, never silently dropped.
    left = re.search(r'<p class="bc-watch-left-out">(.*?)</p>', page.text, re.S).group(1)
    assert "alert_date__gte=2026-01-01" in left and "_sort" not in left
    words = shlex.split(command)
    assert words[:3] == ["basecrawler", "watch", "add"]
    assert f"/-/watch/{words[3]}.atom" in page.text            # where its feed will be
    # Running the command as shown makes the watch of this search.
    target = _copy_db(db_path, tmp_path / "watches.db")
    assert main(["--db", str(target), *words[1:]]) == 0
    store = Store(str(target))
    try:
        (watch,) = repository.all_watches(store)
    finally:
        store.close()
    assert (watch.name, watch.record_type, watch.text, watch.channel) == (words[3], "product_alert", "땅콩 butter", "feed")
    assert watch.facets == (("category", "Food"),) and watch.sources == ("origdemo",) and watch.countries == ("CA",)


def test_watch_names_are_valid_for_any_script():
    from basecrawler.reading.web.watchcommand import suggested_name
    from basecrawler.recordtypes import get_record_type
    from basecrawler.watch.model import Watch, check

    alerts = get_record_type("product_alert")
    for words in ([], ["Listeria"], ["땅콩"], ["燃料", "x" * 80], ["--", "!!"]):
        check(Watch(name=suggested_name(alerts, words), channel="feed"))   # raises on a name a watch cannot have


# ---- in a real browser ---------------------------------------------------------------------

# Outside the checkout, beside tests/test_web_view.py's (BASECRAWLER_SCREENSHOTS moves them).
SCREENSHOTS = Path(os.environ.get("BASECRAWLER_SCREENSHOTS") or Path(tempfile.gettempdir()) / "basecrawler-screenshots")


def _dom(profile, url: str, width: int = 1400, screenshot: str | None = None) -> str:
    """The page's DOM after its scripts ran (and a screenshot a person can look at, when named)."""
    if screenshot:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        f"--user-data-dir={profile}", f"--window-size={width},1000", "--hide-scrollbars",
                        "--virtual-time-budget=8000", f"--screenshot={SCREENSHOTS / screenshot}", url],
                       capture_output=True, timeout=120, check=True)
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-default-apps",
               f"--user-data-dir={profile}", f"--window-size={width},1000", "--enable-logging=stderr", "--v=0",
               "--virtual-time-budget=8000", "--dump-dom", url]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    console = [line for line in result.stderr.splitlines() if ":CONSOLE" in line and "Content Security Policy" in line]
    assert not console, console
    return result.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH: scripts/test installs it")
def test_in_the_browser_groups_switch_card_and_watch_block(grouped, tmp_path):
    db_path, ids = grouped
    profile = tmp_path / "profile"
    with BrowseServer(db_path, port=free_port()) as server:
        table = _dom(profile, server.url + "/alerts/product_alerts", screenshot="20-grouped-table.png")
        every = _dom(profile, server.url + "/alerts/product_alerts?_bc_copies=1")
        card = _dom(profile, f"{server.url}/alerts/product_alerts/{ids[('repubdemo', 'EN/CA/82438')]}", width=390,
                    screenshot="21-copy-card-phone.png")
    assert '<h3 class="bc-count">3건' in table and "모든 출처 보기" in table and "다른 출처 2" in table
    assert "Peanut butter (OECD)" not in table and "Peanut butter (OECD)" in every
    assert "다른 출처에서도 발표됨" in card and "대표 기록으로 가기" in card
    assert f'href="/alerts/product_alerts/{ids[("origdemo", "82438")]}"' in card
    command = _watch_command(table)
    assert shlex.split(command)[3:] == ["product_alert", "--type", "product_alert", "--feed"]
    assert 'class="bc-copy"' in table


def test_facets_of_the_grouped_table_are_its_whole_counts_less_the_copies(grouped, monkeypatch, tmp_path):
    from datasette.app import Datasette
    from datasette.plugins import pm

    # A database of its own name: the facets' cache (per database name) holds nothing of it.
    db_path = _copy_db(grouped[0], tmp_path / "facetsonly.db")
    ds = Datasette([db_path], metadata=build_metadata(db_path), plugins_dir=str(WEB_DIR / "plugins"))
    facets = next(p for p in pm.get_plugins() if hasattr(p, "ValuesFacet"))
    counted, count = [], facets.count_once

    async def recording(datasette, key, sql, params, limit_ms, **options):
        counted.append(sql)
        return await count(datasette, key, sql, params, limit_ms, **options)
    monkeypatch.setattr(facets, "count_once", recording)

    async def fetch():
        return [await ds.client.get(path) for path in ("/facetsonly/product_alerts.json?_col=source&_extra=facet_results",
                                                        "/facetsonly/product_alerts.json?_col=source&_extra=facet_results"
                                                        "&_bc_copies=1")]
    once, every = asyncio.run(fetch())
    # The whole table's counts (counted once per run, or kept by it) less the copies': never a
    # count of every row of the grouped page.
    assert counted and not any("NOT EXISTS" in sql for sql in counted)

    def counts(response, facet):
        results = response.json()["facet_results"]
        results = results.get("results", results)
        return {row["value"]: row["count"] for row in results[facet]["results"]}
    assert counts(once, "source") == {"origdemo": 2, "repubdemo": 1}
    assert counts(every, "source") == {"origdemo": 2, "repubdemo": 2, "mirrordemo": 1}
    assert counts(once, "country") == {"CA": 2, "DE": 1} and counts(every, "country") == {"CA": 4, "DE": 1}
    assert counts(once, "alert_date") == {"2026-08": 2, "2026-07": 1}


def test_the_group_words_in_english_on_request(grouped):
    db_path, ids = grouped
    table, card = _client_pages(db_path, ["/alerts/product_alerts?_col=alert_id&_col=title_ko&_lang=en",
                                          f"/alerts/product_alerts/{ids[('repubdemo', 'EN/CA/82438')]}?_lang=en"])
    assert "Show all copies" in table.text and "other sources 2" in table.text and "Watch this search" in table.text
    assert "Also published by" in card.text and "Go to the main record (origdemo 82438)" in card.text
    assert "모든 출처 보기" not in table.text and "다른 출처에서도 발표됨" not in card.text


def test_the_grouped_tables_count_is_its_rows_less_its_copies_not_a_count_of_each_row(grouped, tmp_path):
    from datasette.app import Datasette

    db_path = _copy_db(grouped[0], tmp_path / "countonly.db")
    # As `browse` serves it: no suggested facets (which count every row of their own).
    ds = Datasette([db_path], metadata=build_metadata(db_path), plugins_dir=str(WEB_DIR / "plugins"),
                   template_dir=str(WEB_DIR / "templates"), settings={"suggest_facets": False})
    database = ds.get_database("countonly")
    ran, execute = [], database.execute

    async def recording(sql, *args, **kwargs):
        ran.append(sql)
        return await execute(sql, *args, **kwargs)
    database.execute = recording

    async def fetch():
        return await ds.client.get("/countonly/product_alerts?_col=alert_id&_col=title_ko")
    page = asyncio.run(fetch())
    assert '<h3 class="bc-count">3건' in page.text
    assert not [sql for sql in ran if sql.lower().startswith("select count(*)") and "NOT EXISTS" in sql]


def test_a_page_reached_from_the_grouped_table_is_counted(grouped):
    # The whole table's page is served without Datasette's count; its links carry that on, and
    # a filtered or every-copy page reached by them still counts its rows.
    db_path, _ids = grouped
    whole, = _client_pages(db_path, ["/alerts/product_alerts?_col=alert_id&_col=title_ko"])
    switch = html.unescape(re.search(r'<a class="bc-copies-toggle" href="([^"]+)"', whole.text).group(1))
    every, filtered = _client_pages(db_path, [switch, "/alerts/product_alerts?_col=alert_id&_col=title_ko"
                                                      "&_nocount=1&country=DE"])
    assert '<h3 class="bc-count">5건' in every.text
    assert '<h3 class="bc-count">1건' in filtered.text


def test_a_large_grouped_search_page_takes_its_count_and_facets_from_the_summary(grouped, monkeypatch, tmp_path):
    """A search page of a large table is not counted by Datasette but from the search's summary,
    on a grouped store too: the summary leaves out the copies the page leaves out (before, a
    grouped page fell back to Datasette's count and per-facet queries: seconds at a million)."""
    from datasette.app import Datasette
    from datasette.plugins import pm

    db_path = _copy_db(grouped[0], tmp_path / "summarised.db")
    ds = Datasette([db_path], metadata=build_metadata(db_path), plugins_dir=str(WEB_DIR / "plugins"),
                   template_dir=str(WEB_DIR / "templates"), settings={"suggest_facets": False})
    web = next(p for p in pm.get_plugins() if hasattr(p, "SUMMARY_COUNT_ROWS"))
    monkeypatch.setattr(web, "SUMMARY_COUNT_ROWS", 0)   # as a table of more than that many records
    database = ds.get_database("summarised")
    ran, execute = [], database.execute

    async def recording(sql, *args, **kwargs):
        ran.append(" ".join(sql.split()).lower())
        return await execute(sql, *args, **kwargs)
    database.execute = recording

    def facet(response, name):
        results = response.json()["facet_results"]
        return {row["value"]: row["count"] for row in results.get("results", results)[name]["results"]}

    async def fetch():
        return [await ds.client.get(path) for path in (
            "/summarised/product_alerts?_search=peanut&_col=title_ko",
            "/summarised/product_alerts?_search=peanut&_col=title_ko&_bc_copies=1",
            "/summarised/product_alerts.json?_search=peanut&_col=source&_extra=facet_results",
            "/summarised/product_alerts.json?_search=peanut&_col=source&_extra=facet_results&_bc_copies=1")]
    once, every, once_json, every_json = asyncio.run(fetch())
    assert "(1건)" in once.text and "(3건)" in every.text
    assert facet(once_json, "source") == {"origdemo": 1}
    assert facet(every_json, "source") == {"origdemo": 1, "repubdemo": 1, "mirrordemo": 1}
    # Neither Datasette's count of the page nor a facet query over its rows ran.
    assert not [sql for sql in ran if sql.startswith("select count(*) from product_alerts")]
    assert not [sql for sql in ran if "as value, count(*)" in sql and "peanut" in sql or ":bc_search" in sql
                and "as value" in sql]
