"""A Korean reader's walk through the web view (issue 32), in real headless Chromium: a store
filled as a fresh clone's `scripts/run --replay` fills it (every source from fixtures/replay,
then the translation worker through the fake LibreTranslate), served by `basecrawler browse`,
and every page type visited — the home page, each record type's table, searches (one found in
one type only, a Japanese term, one that finds nothing), a card of each type, a faceted table,
a missing table, a missing record, a refused query, the chart, the English switch.

On each page the interface's visible words are read from the rendered page (what a reader
sees: `checkVisibility`, the title, placeholders, button labels) outside the elements that
hold a record's own text (DATA below), and the Korean page must have no English word but the
few names in ALLOWED (source ids, country codes, format names, the "English" switch itself).
At a phone's 390 px a table and a card scroll no wider than the screen, and at 1400 px the
table's last column is inside the window.
"""
from __future__ import annotations

import re
import sqlite3
import sys
import urllib.parse
from pathlib import Path

import pytest

pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")
pytest.importorskip("babel", reason="Babel (the message catalogues) is not installed")

import headless
from basecrawler.cli import main
from basecrawler.reading.browse import BrowseServer
from translate.fakeserver import FakeLibreTranslate
from web_fixture import free_port

REPLAY = Path(__file__).resolve().parent.parent / "fixtures" / "replay"
pytestmark = pytest.mark.skipif(headless.CHROMIUM is None, reason="no chromium on PATH: scripts/test installs it")

# Elements that hold a record's own text (as the publisher wrote it, or its translation): the
# table's cells, a card's heading, number and facts, facet values, the group's numbers. The
# interface words placed inside them (INTERFACE) are read again.
DATA = ("td, dd, code, .bc-ko, .bc-original, .bc-heading, .bc-heading-original, .bc-number, "
        ".facet-info li, .bc-group-number, .bc-same-recall li")
INTERFACE = ".bc-pending, .bc-field-name, .bc-other-sources, .bc-group-main, .facet-truncated"
# Names a Korean page shows as they are: format names, the switch to English, the database
# file's name; the sources' ids and the record types' countries are added from the store.
ALLOWED = {"English", "JSON", "CSV", "URL", "SQL", "Datasette", "ms", "basecrawler"}
# A command, an option, a parameter or a path the page tells the reader to type, kept as typed.
CODE = re.compile(r"\S*[A-Za-z]\S*[/=_]\S*|\S*[/=_.:]\S*[A-Za-z]\S*|--\S+|\b(?:basecrawler|browse|watch|add)\b")

VISIBLE_TEXT = """(() => {
  const data = %r, iface = %r, out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || !node.textContent.trim() || parent.closest('script, style, noscript, .bc-lang-switch')) continue;
    if (!parent.checkVisibility({checkOpacity: true, checkVisibilityCSS: true})) continue;
    const owner = parent.closest(data + ', ' + iface);
    if (owner && !owner.matches(iface)) continue;
    out.push(node.textContent.trim());
  }
  for (const el of document.querySelectorAll('[placeholder], input[type=submit], button, [aria-label], td[data-label]')) {
    if (!el.checkVisibility()) continue;
    for (const value of [el.getAttribute('placeholder'), el.getAttribute('aria-label'), el.getAttribute('data-label'),
                         el.matches('input[type=submit]') ? el.value : null]) if (value) out.push(value);
  }
  if (!document.querySelector('.bc-card')) out.push(document.title);   // a card's title is its record's
  return out;
})()""" % (DATA, INTERFACE)

# On a phone a row is a block of cells, each under its label (a CSS ::before of data-label).
PHONE_LABELS = """[...document.querySelectorAll('table.rows-and-columns tbody tr:first-child td')].map(
  td => [td.dataset.label, getComputedStyle(td, '::before').content])"""

WIDTHS = """(() => {
  const table = document.querySelector('table.rows-and-columns');
  const last = table && table.querySelector('thead th:last-child');
  return {scroll: document.documentElement.scrollWidth, inner: window.innerWidth,
          lastRight: last ? last.getBoundingClientRect().right : null,
          wrapperRight: table ? table.parentElement.getBoundingClientRect().right : null};
})()"""


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    """The replay store, translated by the fake server; its web view; one browser."""
    folder = tmp_path_factory.mktemp("walk")
    db = str(folder / "replay.db")
    assert main(["--db", db, "-q", "run", "--all", "--mode", "full", "--replay", str(REPLAY)]) == 0
    with FakeLibreTranslate() as fake:
        environ = {"BASECRAWLER_TRANSLATE_BACKEND": "libretranslate", "BASECRAWLER_LIBRETRANSLATE_URL": fake.url}
        with pytest.MonkeyPatch.context() as patch:
            for name, value in environ.items():
                patch.setenv(name, value)
            assert main(["--db", db, "-q", "translate"]) == 0
    with sqlite3.connect(db) as conn:
        ids = {table: conn.execute(f"SELECT min(id) FROM {table}").fetchone()[0]
               for table in ("recalls", "product_alerts", "package_releases")}
        ids["recalls_jp"] = conn.execute("SELECT min(id) FROM recalls WHERE source = 'jp'").fetchone()[0]
        names = {row[0] for table in ("recalls", "product_alerts", "package_releases")
                 for column in ("source", "country")
                 if column in {c[1] for c in conn.execute(f"PRAGMA table_info({table})")}
                 for row in conn.execute(f"SELECT DISTINCT {column} FROM {table}")}
    with BrowseServer(db, port=free_port()) as server:
        with headless.Browser(folder / "profile") as browser:
            yield server, browser, ids, ALLOWED | {str(n) for n in names if n} | {Path(db).stem}


def pages(ids: dict) -> dict[str, str]:
    """Every page type a reader meets, by name."""
    return {
        "home": "/",
        "vehicle table": "/replay/recalls",
        "product table": "/replay/product_alerts",
        "package table": "/replay/package_releases",
        "search found in one type": "/replay/recalls?_search=Listeria",
        "search Japanese": "/replay/recalls?_search=%E7%87%83%E6%96%99",       # 燃料
        "search nothing found": "/replay/product_alerts?_search=zzqxnothing",
        "faceted table": "/replay/recalls?country=JP",
        "sorted table": "/replay/recalls?_sort=recall_date",
        "every column": "/replay/product_alerts?_bc_all=1",
        "vehicle card": f"/replay/recalls/{ids['recalls']}",
        "Japanese card": f"/replay/recalls/{ids['recalls_jp']}",
        "product card": f"/replay/product_alerts/{ids['product_alerts']}",
        "package card": f"/replay/package_releases/{ids['package_releases']}",
        "missing table": "/replay/no_such_table",
        "missing record": "/replay/recalls/99999999",
        "missing page": "/no-such-page",
        "refused query": "/replay?sql=select+1",
        "chart": "/-/dashboards/records",
        "watch this search": "/-/watch-this?table=product_alerts&_search=Listeria",
    }


def english_words(texts, allowed: set[str]) -> set[str]:
    words = set()
    for text in texts:
        # The refusal answers before the language is known, in both: its Korean half is read.
        text = text.split(" / ")[0] if re.search(r"[가-힣]", text) else text
        words |= {w for w in re.findall(r"[A-Za-z][A-Za-z]+", CODE.sub(" ", text)) if w not in allowed}
    return words


def interface_text(browser, url: str, width: int = 1400) -> list[str]:
    """The interface's visible words; the words searched for (quoted in the page's count line)
    are the reader's own and left out."""
    browser.open(url, width=width)
    texts = browser.evaluate(VISIBLE_TEXT)
    searched = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).get("_search")
    return [text.replace(f'"{searched[0]}"', '""') for text in texts] if searched else texts


def test_every_page_type_in_korean_shows_no_english_interface_word(walk):
    server, browser, ids, allowed = walk
    found = {}
    for name, path in pages(ids).items():
        english = english_words(interface_text(browser, server.url + path), allowed)
        if english:
            found[name] = sorted(english)
    # A phone shows a few words of its own (the sort menu in place of the column headers).
    for name in ("vehicle table", "product card", "search Japanese"):
        english = english_words(interface_text(browser, server.url + pages(ids)[name], width=390), allowed)
        if english:
            found[f"{name} at 390 px"] = sorted(english)
    assert found == {}
    assert not browser.console_errors, browser.console_errors


def test_every_page_type_in_english_shows_no_korean_interface_word(walk):
    server, browser, ids, _allowed = walk
    found = {}
    for name, path in pages(ids).items():
        if name == "refused query":     # answered before the language is known: in both
            continue
        texts = interface_text(browser, f"{server.url}{path}{'&' if '?' in path else '?'}_lang=en")
        korean = [text for text in texts if re.search(r"[가-힣]", text)]
        if korean:
            found[name] = korean
    browser.open(server.url + "/?_lang=ko")          # the next test starts in Korean again
    assert found == {}


def test_the_walk_reads_the_interface_and_leaves_the_records_text_out(walk):
    # The reader of the check itself: the Korean words are read, the originals are not.
    server, browser, ids, allowed = walk
    table = interface_text(browser, server.url + "/replay/product_alerts?_search=Listeria")
    assert any("검색" in text for text in table) and any("건" in text for text in table)
    assert not any("Listeria" in text for text in table)     # the term searched for, the records' text
    assert any(re.match(r'[\d,]+건 · 검색: ""', text) for text in table), table
    card = interface_text(browser, server.url + f"/replay/product_alerts/{ids['product_alerts']}")
    assert any("원문" in text for text in card)
    assert english_words(["Show all copies / 모두"], allowed) == {"Show", "all", "copies"}
    assert english_words(["허용되지 않음 / Not allowed"], allowed) == set()


def test_the_english_switch_turns_the_same_pages_english(walk):
    server, browser, ids, allowed = walk
    for path in ("/replay/recalls", f"/replay/product_alerts/{ids['product_alerts']}"):
        browser.open(server.url + path + ("&" if "?" in path else "?") + "_lang=en")
        assert browser.evaluate("document.documentElement.lang") == "en"
        switch = browser.evaluate("document.querySelector('.bc-lang-switch a').textContent")
        assert switch == "한국어"
        hangul = [t for t in browser.evaluate(VISIBLE_TEXT) if re.search(r"[가-힣]", t)]
        assert hangul == [], hangul
    # The choice is kept (a cookie): the next page without `_lang` stays English; back to Korean.
    browser.open(server.url + "/replay/package_releases")
    assert browser.evaluate("document.documentElement.lang") == "en"
    browser.open(server.url + "/replay/package_releases?_lang=ko")
    assert browser.evaluate("document.documentElement.lang") == "ko"


@pytest.mark.parametrize("lang", ["ko", "en"])
def test_at_390_px_no_page_scrolls_sideways_and_at_1400_the_last_column_is_in_view(walk, lang):
    server, browser, ids, _allowed = walk
    wide = []
    for path in ("/replay/recalls", "/replay/product_alerts", "/replay/package_releases",
                 f"/replay/recalls/{ids['recalls']}", f"/replay/product_alerts/{ids['product_alerts']}",
                 f"/replay/package_releases/{ids['package_releases']}", "/replay/recalls?_search=Listeria"):
        browser.open(f"{server.url}{path}{'&' if '?' in path else '?'}_lang={lang}", width=390, height=844)
        phone = browser.evaluate(WIDTHS)
        if phone["scroll"] > phone["inner"]:
            wide.append((path, 390, phone))
        if "?" not in path and path.count("/") == 2:
            labels = browser.evaluate(PHONE_LABELS)
            assert labels and all(content == f'"{label}"' for label, content in labels), labels
        if path.count("/") == 2 and "?" not in path:      # a type's table
            browser.open(f"{server.url}{path}?_lang={lang}", width=1400)
            desk = browser.evaluate(WIDTHS)
            if desk["scroll"] > desk["inner"] or desk["lastRight"] is None or desk["lastRight"] > desk["inner"]:
                wide.append((path, 1400, desk))
    assert wide == []


if __name__ == "__main__":   # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
