"""The web view as a person sees it: real headless Chromium (Debian's `chromium`, installed by
scripts/test) against `browse`'s Datasette on 127.0.0.1, over fixtures/web/recalls.json plus
web_fixture's EXTRA and HOSTILE records.

Each page is loaded twice: once for a screenshot a person can look at, saved in
$TMPDIR/basecrawler-screenshots/ (BASECRAWLER_SCREENSHOTS moves it), once with --dump-dom
for the assertions, taken after the page's JavaScript ran. Every page is also checked for
Content-Security-Policy violations in Chromium's console: the view's own scripts must run under
the policy, and a blocked script would mean something tried to run that should not.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from basecrawler.reading.browse import DASHBOARD_PATH, BrowseServer
from record_types.vehicle_recall import VEHICLE_RECALL
from web_fixture import HOSTILE_URLS, PWNED

pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH: scripts/test installs it (BASECRAWLER_DEBIAN_EXTRAS)")

# Outside the checkout (tests never write into it); BASECRAWLER_SCREENSHOTS moves them.
SCREENSHOTS = Path(os.environ.get("BASECRAWLER_SCREENSHOTS") or Path(tempfile.gettempdir()) / "basecrawler-screenshots")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from web_fixture import fill
    db_path = fill(tmp_path_factory.mktemp("web") / "recalls.db", extra=True, hostile=True)
    with BrowseServer(db_path, port=free_port()) as running:
        yield running


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    return tmp_path_factory.mktemp("chromium-profile")


def chromium(profile, url: str, *args: str) -> tuple[str, str]:
    """Run headless Chromium once on `url`: no network beyond loopback, no first-run chatter.
    --virtual-time-budget lets the page's scripts (and their fetches) finish first; the console
    goes to stderr (--enable-logging). Returns (stdout, console lines)."""
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-default-apps",
               "--hide-scrollbars", f"--user-data-dir={profile}", "--window-size=1400,1000",
               "--enable-logging=stderr", "--v=0", "--virtual-time-budget=8000", *args, url]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    console = [line for line in result.stderr.splitlines() if ":CONSOLE" in line]
    return result.stdout, console


def page(server, profile, path: str, screenshot: str) -> str:
    """Screenshot `path` into SCREENSHOTS/`screenshot` and return its DOM after scripts ran;
    fails on any Content-Security-Policy violation the page's console reports."""
    url = server.url + path
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    target = SCREENSHOTS / screenshot
    target.unlink(missing_ok=True)
    chromium(profile, url, f"--screenshot={target}")
    assert target.stat().st_size > 10_000, f"empty screenshot of {url}"
    print(f"screenshot: {target}")
    dom, console = chromium(profile, url, "--dump-dom")
    violations = [line for line in console if "Content Security Policy" in line]
    assert not violations, violations
    return dom


def row_id(server, number: str) -> int:
    query = urllib.parse.urlencode({"recall_number": number, "_shape": "array", "_col": "recall_number"})
    with urllib.request.urlopen(f"{server.url}/recalls/recalls.json?{query}", timeout=10) as response:
        return json.load(response)[0]["id"]


def header_columns(dom: str) -> list[str]:
    return re.findall(r'<th[^>]*\bdata-column="([^"]+)"', dom)


def table_row(dom: str, number: str) -> str:
    """The HTML of the table row showing recall `number`."""
    rows = re.findall(r"<tr>.*?</tr>", dom, re.S)
    return next(row for row in rows if f">{number}<" in row)


def summary_cell(row: str) -> str:
    """The row's text cell (the declared best text: summary, else defect / cause, else component)."""
    return re.search(r'<td class="col-summary_ko.*?</td>', row, re.S).group(0)


def test_home_opens_on_the_table_with_the_declared_columns(server, profile):
    dom = page(server, profile, "/", "01-recalls-table.png")
    assert header_columns(dom) == ["id", *VEHICLE_RECALL.listing, "summary_ko", "source_url"]
    assert '<h3 class="bc-count">17건' in dom                 # Korean first: the count line
    # Column descriptions folded away (our script ran) and the table comes first.
    assert '<details class="bc-column-help">' in dom
    assert dom.index("bc-column-help") < dom.index('class="rows-and-columns"')
    # The Korean summary with the original beside it, and the untranslated one as fallback.
    assert "연료 펌프의 임펠러가 변형되어" in dom and "燃料ポンプのインペラが変形し" in dom
    assert "번역 대기" in dom and "Die Kraftstoffleitung kann undicht werden." in dom
    assert 'href="https://www.nhtsa.gov/recalls?nhtsaId=24V202"' in dom
    undated = table_row(dom, "2024-077")            # the stored sentinel never shows as a date
    assert "날짜 미상" in undated and "1970" not in undated


def test_a_translated_recall_without_summary_shows_its_korean_cause(server, profile):
    # MLIT publishes no summary, only component / cause / remedy: the display rule falls back.
    dom = page(server, profile, "/recalls/recalls?country=JP", "01b-japanese-best-text.png")
    row = table_row(dom, "JP-4777")
    assert "전조등 스위치의 접점이 마모되어" in row and "前照灯のスイッチの接点が摩耗し" in row
    assert "번역 대기" not in summary_cell(row)
    assert "번역 대기" in summary_cell(table_row(dom, "JP-4901"))    # untranslated: says so    # untranslated: says so


def test_facets_for_country_source_manufacturer_model_year_and_month(server, profile):
    dom = page(server, profile, "/recalls/recalls", "01-recalls-table.png")
    for facet in ("country", "source", "manufacturer_key", "model_year", "recall_date"):
        assert f'id="facet-{facet}"' in dom, facet
    assert "월별 리콜 날짜" in dom and "<strong>연식" in dom
    facet = dom[dom.index('id="facet-manufacturer_key"'):]
    facet = facet[:facet.index("</ul>")]
    assert ">FORD</a> 5" in facet            # Ford, FORD, Ford Motor Company (+ of Australia) as one
    months = dom[dom.index('id="facet-recall_date"'):]
    months = months[:months.index("</ul>")]
    assert ">날짜 미상</a> 1" in months and "1970" not in months


def test_model_year_facet_selects_every_record_whose_range_covers_the_year(server, profile):
    dom = page(server, profile, "/recalls/recalls?_bcf_model_year=2020&_col=model_year&_col=recall_number",
               "02b-model-year-2020.png")
    assert '<h3 class="bc-count">4건 · 연식: 2020 · ' in dom
    for number, years in (("JP-5001", "2020"), ("24V-150", "2020"), ("JP-4980", "2019-2021"), ("JP-4777", "2018-2020")):
        assert years in table_row(dom, number), number


def test_manufacturer_facet_selects_every_spelling(server, profile):
    query = urllib.parse.urlencode([("_col", "manufacturer_original"), ("_col", "manufacturer_key"),
                                    ("manufacturer_key", "FORD")])
    dom = page(server, profile, f"/recalls/recalls?{query}", "02-manufacturer-FORD.png")
    assert '<h3 class="bc-count">5건 · 제조사 키 = FORD · ' in dom
    for spelling in ("> Ford<", "> FORD<", "> Ford Motor Company<", "> Ford Motor Company of Australia Pty Ltd<"):
        assert spelling in dom, spelling


@pytest.mark.parametrize("term, numbers, shot", [
    ("燃料", ["JP-5001", "JP-4901"], "03-search-2-character-japanese.png"),
    ("연료", ["JP-5001"], "04-search-2-character-korean.png"),
])
def test_search_finds_one_and_two_character_terms_like_the_cli(server, profile, term, numbers, shot):
    query = urllib.parse.urlencode({"_search": term})
    dom = page(server, profile, f"/recalls/recalls?{query}", shot)
    assert re.search(f'<h3 class="bc-count">{len(numbers)}건 · 검색: (&#34;|"){term}(&#34;|")', dom)
    # A Korean term only reaches translated recalls: 7 of the 17 are.
    assert ("17건 중 7건 번역됨" in dom) == (term == "연료")
    assert f'value="{term}"' in dom                       # the search box keeps the term
    found = [n for n in ("JP-5001", "JP-4980", "JP-4901", "24V-202") if f">{n}<" in dom]
    assert found == numbers


def test_a_recalls_page_is_a_card_with_original_and_korean_side_by_side(server, profile):
    dom = page(server, profile, f"/recalls/recalls/{row_id(server, 'JP-5001')}", "05-recall-card.png")
    card = dom[dom.index('<article class="bc-card">'):dom.index("</article>")]
    # The country by its name in the reader's language, its code beside it.
    assert "국가 일본 (JP) · 리콜 번호 JP-5001" in card and "2024년 5월 2일" in card
    assert "<dt>제조사 키</dt><dd>HONDA</dd>" in card
    summary = card[card.index('bc-row-summary'):]
    summary = summary[:summary.index("</section>")]
    original, korean = summary.index("燃料ポンプのインペラ"), summary.index("연료 펌프의 임펠러")
    assert korean < original                               # Korean first, the original beside it
    assert 'href="https://www.mlit.go.jp/jidosha/carinf/rcl/data/jp-5001.html"' in card


def test_a_card_says_date_unknown_never_1970(server, profile):
    dom = page(server, profile, f"/recalls/recalls/{row_id(server, '2024-077')}", "05b-card-date-unknown.png")
    card = dom[dom.index('<article class="bc-card">'):dom.index("</article>")]
    assert "<dt>리콜 날짜</dt><dd>날짜 미상</dd>" in card and "1970" not in card


def test_the_same_card_in_english_on_request(server):
    # `?_lang=en` (no cookie: a plain request) gives the English beside the Korean default.
    with urllib.request.urlopen(f"{server.url}/recalls/recalls/{row_id(server, '2024-077')}?_lang=en",
                                timeout=10) as response:
        html = response.read().decode()
    card = html[html.index('<article class="bc-card">'):html.index("</article>")]
    assert "<dt>Recall date</dt><dd>date unknown</dd>" in card and "리콜 날짜" not in card
    assert "Vehicle recall" in card and "Country Canada (CA)" in card


def test_a_tables_country_cells_name_the_country_in_the_readers_language(server):
    for lang, canada in (("ko", "캐나다 (CA)"), ("en", "Canada (CA)")):
        with urllib.request.urlopen(f"{server.url}/recalls/recalls?country=CA&_lang={lang}", timeout=10) as response:
            html = response.read().decode()
        cells = re.findall(r'<td class="col-country[^"]*"[^>]*>([^<]*)</td>', html)
        assert cells and set(cells) == {canada}, (lang, cells)
        # The country facet (its selected value here) and the count line's filter, by the same name.
        facets = html[html.index('class="facet-results"'):]
        assert f"<li>{canada} &middot;" in facets, lang
        count_line = re.search(r'<h3 class="bc-count"[^>]*>(.*?)</h3>', html, re.S).group(1)
        assert f" = {canada} · " in count_line, (lang, count_line)


def test_chart_of_recalls_per_month_per_country_draws_offline(server, profile):
    dom = page(server, profile, DASHBOARD_PATH, "06-chart-per-month.png")
    assert "국가별 월별 차량 리콜" in dom and "Vehicle recalls per month per country" not in dom
    # Vega-Lite drew the chart (its scripts are the plugin's own files, served from loopback)
    # under the CSP: a legend with every country of the fixture and the months on the axis,
    # including the two months without any recall (the axis is continuous).
    assert 'class="marks"' in dom and 'data-bc-drawn="1"' in dom
    for label in ("AU", "CA", "EU", "JP", "US", "2023-10", "2023-11", "2023-12", "2024-01", "2024-06"):
        assert f">{label}<" in dom, label


# ---- hostile records: nothing they carry runs or links (#22.4) -----------------------------
def assert_nothing_ran(dom: str) -> None:
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert PWNED not in body, body                        # no payload executed
    hrefs = re.findall(r'href="([^"]*)"', dom)
    assert not [h for h in hrefs if not h.startswith(("http://", "https://", "/", "#", "?"))], hrefs
    assert "<script>document.body" not in dom and "<img src=\"x\"" not in dom and "<svg onload" not in dom


def test_hostile_records_in_the_table_stay_text(server, profile):
    dom = page(server, profile, "/recalls/recalls?source=us&_sort_desc=recall_date", "07-hostile-table.png")
    assert_nothing_ran(dom)
    row = table_row(dom, "EVIL-1")
    assert "&lt;script&gt;document.body.setAttribute" in row           # shown, escaped
    assert "javascript:document.body" in row and "<a" not in row.split("javascript:")[0][-60:]
    assert "data:text/html" in table_row(dom, "EVIL-2")


@pytest.mark.parametrize("number", ["EVIL-1", "EVIL-2"])
def test_hostile_record_card_runs_nothing_and_links_nothing(server, profile, number):
    path = f"/recalls/recalls/{row_id(server, number)}"
    dom = page(server, profile, path, f"08-hostile-card-{number}.png")
    assert_nothing_ran(dom)
    card = dom[dom.index('<article class="bc-card">'):dom.index("</article>")]
    assert "웹 링크가 아니어서 글자로 표시" in card and HOSTILE_URLS[number].split(":")[0] + ":" in card
    with urllib.request.urlopen(server.url + path, timeout=10) as response:
        policy = response.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "'unsafe-inline'" not in policy.split("style-src")[0]
