"""Korea's product recalls (KATS, 제품안전정보센터), read from Seoul's mirror of the domestic
recall list, as `product_alert` records in Korean.

Where the data comes from: `https://sftc.seoul.go.kr/fe/si/recallDmstc/NR_list.do?pageIndex=N`,
a paged HTML table of 10 rows (번호, 제품명, 모델명, 사업자명, 리콜종류, 공표일), newest first,
about the last 3 years (~124 pages); the city republishes KATS data with no sign-up.

Rules decided from the published pages (see also fixtures/kr/README.md):

- Paging. Pages are read from 1 until a page answers with an empty table (the mirror's answer
  past its window: 200 with no row) — never past MAX_PAGES. An incremental run also stops after
  the first page that reaches before the run's window (the list is newest first).
  A page without the list table at all is an error page, not the end: the run fails with the
  page kept (UnexpectedContent), so nothing is taken for "no more recalls".
- Identity: the KATS recall uid in each row's `onclick="viewDtail(10022792)"`, never 번호 (a
  running number that shifts by one with every new recall). The uid is also the id in OECD's
  `EN/KR/K26/EP/<uid>`; kept as `extra["kats_uid"]` for the link between the two.
- 제품명 is kept whole as the product; its trailing parenthesised part is the KATS product
  class (`수영보조용품(착용형)(물놀이기구)` → category `물놀이기구`). 모델명 stays in the title
  beside the product (`제품명 · 모델명`) and in `extra["model"]`. 사업자명 (the business) is the brand. 리콜종류 is kept as published as
  the risk class (`자발적리콜` / `명령에따른리콜`) and as `extra["recall_kind"]`
  (`voluntary` / `ordered`).
- 공표일 `YYYY.MM.DD` is the date.
- The text is Korean already (`source_lang = "ko"`): its originals are its Korean.
"""
from __future__ import annotations

import datetime as dt
import logging
import re
from typing import Iterator

import lxml.html

from basecrawler import BaseCrawler, UnexpectedContent
from basecrawler.formats import text as text_rules

log = logging.getLogger(__name__)

LIST_PATH = "/fe/si/recallDmstc/NR_list.do?pageIndex={}"
VIEW_PATH = "/fe/si/recallDmstc/NR_view.do?recallUid={}"
COLUMNS = ("번호", "제품명", "모델명", "사업자명", "리콜종류", "공표일")
# The mirror holds ~124 pages; a list that never ends is refused well before it costs much.
MAX_PAGES = 2000
RECALL_KINDS = {"자발적리콜": "voluntary", "명령에따른리콜": "ordered"}
AUTHORITY = "국가기술표준원 제품안전정보센터 (KATS)"
_UID_RE = re.compile(r"viewDtail\(\s*'?(\d+)'?\s*\)")
_DATE_RE = re.compile(r"^(\d{4})[.\-/]\s*(\d{1,2})[.\-/]\s*(\d{1,2})\.?$")
_TRAILING_CLASS_RE = re.compile(r"^(.*\S)\s*\(([^()]+)\)$")


def clean(value: str | None) -> str | None:
    return text_rules.clean_text(value, markup=True, squash_space=True)


def read_page(html: str, url: str) -> list[dict]:
    """The rows of one list page as {column: text, "uid": …}; [] for the empty table past the
    end; UnexpectedContent for a page without the list table (an error page)."""
    try:
        document = lxml.html.fromstring(html)
    except (ValueError, lxml.etree.ParserError) as exc:
        raise UnexpectedContent(f"the recall list page is not HTML: {exc}", url=url) from None
    tables = document.xpath("//table[contains(concat(' ', normalize-space(@class), ' '), ' tbl-list ')]")
    if not tables:
        raise UnexpectedContent("the page has no recall list table (tbl-list): an error page, not the list's end",
                                url=url, body=html.encode("utf-8")[:20000])
    table = tables[0]
    header = [clean(th.text_content()) for th in table.xpath(".//thead//th")]
    if header and tuple(header[:len(COLUMNS)]) != COLUMNS:
        raise UnexpectedContent(f"the recall list's columns changed: {header!r}", url=url)
    rows = []
    for tr in table.xpath(".//tbody/tr"):
        cells = tr.xpath("./td")
        if not cells:
            continue
        values = [clean(td.text_content()) for td in cells]
        if len(cells) == 1 and not _UID_RE.search(lxml.html.tostring(tr, encoding="unicode")):
            continue   # a "no data" row spanning the table
        row = dict(zip(COLUMNS, values))
        found = _UID_RE.search(" ".join(a.get("onclick") or "" for a in tr.xpath(".//*[@onclick]")))
        row["uid"] = found.group(1) if found else None
        rows.append(row)
    return rows


def split_product(name: str | None) -> tuple[str | None, list[str]]:
    """'수영보조용품(착용형)(물놀이기구)' → (the name whole, ['물놀이기구']); no trailing
    parentheses → no category."""
    if not name:
        return None, []
    m = _TRAILING_CLASS_RE.match(name)
    category = clean(m.group(2)) if m else None
    return name, [category] if category else []


def list_date(value: str | None):
    """'2026.08.11' → a date; anything else None."""
    m = _DATE_RE.match((value or "").strip())
    if not m:
        return None
    try:
        return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return None


class KoreaRecallsCrawler(BaseCrawler):
    """KATS domestic recalls through Seoul's mirror: the paged list, one record per recall uid."""

    source = "kr"
    country = "KR"
    source_lang = "ko"
    record_type = "product_alert"
    endpoints = {"site": "https://sftc.seoul.go.kr"}
    rate_per_s = 2.0

    def fetch(self, ctx) -> Iterator[dict]:
        incremental = ctx.mode == "incremental" and ctx.since is not None
        total = 0
        for page in range(1, MAX_PAGES + 1):
            url = ctx.url("site", LIST_PATH, page)
            rows = read_page(ctx.http.get_text(url, expect="html"), url)
            if not rows:
                log.info("kr: page %d is empty: the end of the list (%d rows read)", page, total)
                return
            total += len(rows)
            for row in rows:
                row["page"] = page
                yield row
            # Newest first: once a row is older than the window, every later page is too.
            if incremental and any((date := list_date(row.get("공표일"))) and date < ctx.since for row in rows):
                log.info("kr: page %d reaches before the window: stopping (%d rows read)", page, total)
                return
        ctx.warn(f"kr: stopped after {MAX_PAGES} pages without reaching an empty page")

    def parse(self, ctx, raw: dict) -> dict:
        if not isinstance(raw, dict):
            raise ValueError(f"not a list row: {str(raw)[:100]}")
        uid = raw.get("uid")
        if not uid:
            raise ValueError(f"list row without a recall uid (viewDtail): {str(raw)[:200]}")
        product, category = split_product(raw.get("제품명"))
        model = raw.get("모델명")
        published_kind = raw.get("리콜종류")
        date_text = raw.get("공표일")
        date = list_date(date_text)
        extra = {"kats_uid": uid, "model": model, "recall_kind": RECALL_KINDS.get(published_kind or ""),
                 "list_number": raw.get("번호")}
        if date is None and date_text:
            extra["date_published"] = date_text
        title = " · ".join(part for part in (product, model) if part) or None
        return {
            "alert_id": uid,
            "alert_date": date,
            "title_original": title,
            "product_original": product,
            "category": category,
            "brand": raw.get("사업자명"),
            "risk_class": published_kind,
            "authority": AUTHORITY,
            "source_url": ctx.public_url(ctx.url("site", VIEW_PATH, uid)),
            "extra": {key: value for key, value in extra.items() if value},
        }
