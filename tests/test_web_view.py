"""The web view as a person sees it: real headless Chromium (Debian's `chromium`, installed by
scripts/test) against `browse`'s Datasette on 127.0.0.1, over fixtures/web/recalls.json.

Each page is loaded twice: once for a screenshot a person can look at, saved in
tests/screenshots/ (ignored by git; BASECRAWLER_SCREENSHOTS moves it), once with --dump-dom
for the assertions, taken after the page's JavaScript ran.
"""
import json
import os
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from basecrawler.browse import DASHBOARD_PATH, BrowseServer

pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH: scripts/test installs it (BASECRAWLER_DEBIAN_EXTRAS)")

SCREENSHOTS = Path(os.environ.get("BASECRAWLER_SCREENSHOTS") or Path(__file__).parent / "screenshots")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from web_fixture import fill

    db_path = fill(tmp_path_factory.mktemp("web") / "recalls.db")
    with BrowseServer(db_path, port=free_port()) as running:
        yield running


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    return tmp_path_factory.mktemp("chromium-profile")


def chromium(profile, url: str, *args: str) -> str:
    """Run headless Chromium once on `url`: no network beyond loopback, no first-run chatter.
    --virtual-time-budget lets the page's scripts (and their fetches) finish first."""
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-default-apps",
               "--hide-scrollbars", f"--user-data-dir={profile}", "--window-size=1400,1000",
               "--virtual-time-budget=8000", *args, url]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def page(server, profile, path: str, screenshot: str) -> str:
    """Screenshot `path` into SCREENSHOTS/`screenshot` and return its DOM after scripts ran."""
    url = server.url + path
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    target = SCREENSHOTS / screenshot
    target.unlink(missing_ok=True)
    chromium(profile, url, f"--screenshot={target}")
    assert target.stat().st_size > 10_000, f"empty screenshot of {url}"
    print(f"screenshot: {target}")
    return chromium(profile, url, "--dump-dom")


def row_id(server, number: str) -> int:
    query = urllib.parse.urlencode({"recall_number": number, "_shape": "array", "_col": "recall_number"})
    with urllib.request.urlopen(f"{server.url}/recalls/recalls.json?{query}", timeout=10) as response:
        return json.load(response)[0]["id"]


def header_columns(dom: str) -> list[str]:
    import re
    return re.findall(r'<th[^>]*\bdata-column="([^"]+)"', dom)


def test_recalls_opens_on_the_table_with_a_short_column_set(server, profile):
    dom = page(server, profile, "/recalls/recalls", "01-recalls-table.png")
    assert header_columns(dom) == ["id", "country", "recall_number", "recall_date", "manufacturer_original",
                                   "model_original", "summary_ko", "source_url"]
    assert "12 rows" in dom
    # Column descriptions folded away (our script ran) and the table comes first.
    assert '<details class="bc-column-help">' in dom
    assert dom.index("bc-column-help") < dom.index('class="rows-and-columns"')
    # The Korean summary with the original beside it, and the untranslated one as fallback.
    assert "연료 펌프의 임펠러가 변형되어" in dom and "燃料ポンプのインペラが変形し" in dom
    assert "not yet translated" in dom and "Die Kraftstoffleitung kann undicht werden." in dom
    assert 'href="https://www.nhtsa.gov/recalls?nhtsaId=24V202"' in dom


def test_facets_for_country_source_manufacturer_model_year_and_month(server, profile):
    dom = page(server, profile, "/recalls/recalls", "01-recalls-table.png")
    for facet in ("country", "source", "manufacturer_key", "model_year", "recall_date"):
        assert f'id="facet-{facet}"' in dom, facet
    assert "recall_date (month)" in dom
    facet = dom[dom.index('id="facet-manufacturer_key"'):]
    facet = facet[:facet.index("</ul>")]
    assert ">FORD</a> 4" in facet            # Ford, FORD, Ford Motor Company (+ of Australia) as one


def test_manufacturer_facet_selects_every_spelling(server, profile):
    query = urllib.parse.urlencode([("_col", "manufacturer_original"), ("_col", "manufacturer_key"),
                                    ("manufacturer_key", "FORD")])
    dom = page(server, profile, f"/recalls/recalls?{query}", "02-manufacturer-FORD.png")
    assert "4 rows where manufacturer_key = " in dom
    for spelling in (">Ford<", ">FORD<", ">Ford Motor Company<", ">Ford Motor Company of Australia Pty Ltd<"):
        assert spelling in dom, spelling


@pytest.mark.parametrize("term, numbers, shot", [
    ("燃料", ["JP-5001", "JP-4901"], "03-search-2-character-japanese.png"),
    ("연료", ["JP-5001"], "04-search-2-character-korean.png"),
])
def test_search_finds_one_and_two_character_terms_like_the_cli(server, profile, term, numbers, shot):
    query = urllib.parse.urlencode({"_search": term})
    dom = page(server, profile, f"/recalls/recalls?{query}", shot)
    assert f'{len(numbers)} row{"s" if len(numbers) > 1 else ""} where search matches "{term}"' in dom
    # A Korean term only reaches translated recalls: 5 of the fixture's 12 are.
    assert ("5 of 12 recalls translated" in dom) == (term == "연료")
    assert f'value="{term}"' in dom                       # the search box keeps the term
    found = [n for n in ("JP-5001", "JP-4980", "JP-4901", "24V-202") if f">{n}<" in dom]
    assert found == numbers


def test_a_recalls_page_is_a_card_with_original_and_korean_side_by_side(server, profile):
    dom = page(server, profile, f"/recalls/recalls/{row_id(server, 'JP-5001')}", "05-recall-card.png")
    card = dom[dom.index('<article class="bc-card">'):dom.index("</article>")]
    assert "JP JP-5001" in card and "2024-05-02" in card and "(HONDA)" in card
    summary = card[card.index('class="bc-row-summary"'):]
    summary = summary[:summary.index("</tr>")]
    original, korean = summary.index("燃料ポンプのインペラ"), summary.index("연료 펌프의 임펠러")
    assert original < korean                               # one row: original, then Korean beside it
    assert 'href="https://www.mlit.go.jp/jidosha/carinf/rcl/data/jp-5001.html"' in card


def test_chart_of_recalls_per_month_per_country_draws_offline(server, profile):
    dom = page(server, profile, DASHBOARD_PATH, "06-chart-per-month.png")
    assert "Recalls per month per country" in dom
    # Vega-Lite drew the chart (its scripts are the plugin's own files, served from loopback):
    # a legend with every country of the fixture and the months on the axis.
    assert 'class="marks"' in dom
    for label in ("AU", "CA", "EU", "JP", "US", "2024-01", "2024-06"):
        assert f">{label}<" in dom, label
