"""Australian vehicle recalls (vehiclerecalls.gov.au): listing pages, then one Drupal detail
page per recall, read field by field with XPath.

- Listing: `/recalls/browse-all-recalls?page=N` (20 per page, newest first), recall links
  `/recalls/rec-NNNNNN`. Pages are read until one brings no id not seen before (Drupal serves
  an empty view, or repeats the last page, past the end). A first page without any recall link
  means the layout changed: nothing is yielded, so a full run ends `suspect`.
- Incremental runs fetch only detail pages of recalls not yet stored (or listed with a date
  inside the run's window) and stop at the first listing page where every recall is already
  stored and older: the site rate-limits bulk crawls (403), so it is not walked needlessly.
- Detail: Drupal field blocks (`field--name-field-r-make`, `-r-models`, `-r-date-ranges`,
  `-r-original-publish-date`, `-r-defect`, `-r-action`, `field--name-field-product-category`;
  `-r-hazard`, when a page has it, becomes the consequence).
  Field items hold nested divs and paragraphs, so a field's text is the whole text content of
  its items (block elements become line breaks), never a pattern up to the next `</div>`.
  Fields not mapped to the model are kept in `extra["fields"]` under their label.
- A detail page that fails on its own (404, unexpected body, transient after retries) is a dead
  letter and the crawl goes on; a block (403 after the budget) fails the source.
"""
from __future__ import annotations

import datetime as dt
import logging
import re
from itertools import count
from typing import Iterator

import lxml.html

from basecrawler import BaseCrawler, NotFound, Raw
from basecrawler.fetch.urls import path_segment
from basecrawler.formats.dates import parse_date
from basecrawler.model import year_range

log = logging.getLogger(__name__)

LISTING_PATH = "/recalls/browse-all-recalls?page={page}"
MAX_LISTING_PAGES = 2000          # ~5,500 campaigns at 20 a page is ~280 pages
_RECALL_LINK = re.compile(r"/recalls/(rec-\d+)/?(?:[?#].*)?$", re.IGNORECASE)
_DMY = re.compile(r"\b\d{1,2}/\d{1,2}/\d{4}\b")
_YEAR = re.compile(r"\b(19|20)\d{2}\b")
_XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")

# Drupal field machine name → Recall field.
FIELD_MAP = {
    "field-r-make": "manufacturer_original",
    "field-r-models": "model_original",
    "field-r-defect": "defect_cause_original",
    "field-r-hazard": "consequence_original",
    "field-r-action": "remedy_original",
}
LIST_FIELDS = {"field-r-make", "field-r-models"}   # several items joined with ", "
BLOCK_TAGS = {"p", "div", "li", "ul", "ol", "table", "tr", "h1", "h2", "h3", "h4", "h5", "h6",
              "section", "article", "blockquote", "dd", "dt", "dl", "pre"}


class AustraliaCrawler(BaseCrawler):
    """Australian vehicle recalls (vehiclerecalls.gov.au listing + Drupal detail pages)."""

    source = "au"
    country = "AU"
    source_lang = "en"
    endpoints = {"site": "https://www.vehiclerecalls.gov.au"}
    # The site has answered bulk crawls with 403: one request at a time, one per second.
    rate_per_s = 1.0
    concurrency = 1

    def fetch(self, ctx) -> Iterator[dict]:
        seen: set[str] = set()
        yield from self._walk_listing(ctx, seen)
        # Recalls not yet collected (a detail page that failed) come again whatever their
        # date, though an incremental walk stops before the listing page that holds them.
        for entry in ctx.ledger.retries(seen):
            yield from self._detail_item(ctx, entry.key)

    def _walk_listing(self, ctx, seen: set[str]) -> Iterator[dict]:
        for page in count(0):
            if page >= MAX_LISTING_PAGES:
                log.warning("au: stopped after %d listing pages", page)
                return
            url = ctx.url("site", LISTING_PATH.format(page=page))
            try:
                html = ctx.http.get_text(url, expect="html")
            except NotFound:
                if page == 0:
                    raise
                return  # past the last page
            listed_entries, lost_rows = read_listing(html)
            for row_html in lost_rows:
                # A row the listing shows but whose recall link cannot be read (a broken or
                # missing href): kept for a look, never silently dropped.
                ctx.dead_letter({"listing": url, "item": row_html}, "a listing row without a readable recall link",
                                 stage="fetch", kind="unreadable_item", url=url,
                                 response_sha256=ctx.http.last_sha256)
            entries = [entry for entry in listed_entries if entry[0] not in seen]
            if not entries:
                if page == 0:   # a listing that cannot be read: kept whole for a look (and a retry)
                    ctx.dead_letter(Raw(html, url=url, response_sha256=ctx.http.last_sha256),
                                     "the first listing page has no recall links; the layout may have changed",
                                     kind="unexpected")
                return
            seen.update(number for number, _ in entries)
            wanted = self._wanted(ctx, entries)
            if ctx.mode == "incremental" and not wanted:
                log.info("au: listing page %d holds only stored, older recalls; stopping", page)
                return
            listed = dict(entries)
            for number in wanted:
                ctx.ledger.list(number, url=self.endpoints["site"] + detail_path(number), listed_date=listed.get(number))
            for number in wanted:
                yield from self._detail_item(ctx, number)

    def _detail_item(self, ctx, number: str) -> Iterator[dict]:
        with ctx.ledger.attempt(number):
            item = self._fetch_detail_page(ctx, number)
            if item is not None:
                yield item

    def _wanted(self, ctx, entries: list[tuple[str, dt.date | None]]) -> list[str]:
        """Recall numbers whose detail page this run fetches (all of them in a full run)."""
        if ctx.mode == "full":
            return [number for number, _ in entries]
        known = ctx.known_keys(number for number, _ in entries)
        return [number for number, listed in entries
                if number not in known or (listed is not None and ctx.since is not None and listed >= ctx.since)]

    def _fetch_detail_page(self, ctx, number: str) -> dict | None:
        # One missing or broken page must not stop the others; a block (403) still fails the run.
        # A number that is no path segment is that item's refusal (unsafe_path), never a request.
        with ctx.item({"recall_number": number}, key=number):
            url = ctx.url("site", detail_path(number))
            html = ctx.http.get_text(url, expect="html")
            return {"recall_number": number, "html": html}  # the pipeline notes the page it came from
        return None

    def parse(self, ctx, raw: dict) -> dict:
        number = raw["recall_number"]
        record = parse_detail(raw["html"])
        record["recall_number"] = number
        record["source_url"] = self.endpoints["site"] + detail_path(number)
        return record


def detail_path(number: str) -> str:
    """The detail page of a recall number read from the listing (or the ledger): one encoded
    path segment, never a path (`UnsafePath` for `..` and the like)."""
    return f"/recalls/{path_segment(number.lower())}"


# ---- listing ---------------------------------------------------------------------------
def html_document(html: str):
    """An lxml tree of a page as the site may really send it: lxml refuses text that starts with
    an XML encoding declaration (XHTML served as HTML) or holds NUL / control characters, and
    either would otherwise cost a whole listing page; the HTML parser recovers the rest."""
    html = _XML_DECL.sub("", html.lstrip("\ufeff"), count=1)
    html, removed = _CONTROL.subn("", html)
    if removed:
        log.warning("au: removed %d control character(s) from a page", removed)
    return lxml.html.fromstring(html)


def listing_entries(html: str) -> list[tuple[str, dt.date | None]]:
    """(recall number, listed date or None) for every recall link on a listing page, in order."""
    return read_listing(html)[0]


def read_listing(html: str) -> tuple[list[tuple[str, dt.date | None]], list[str]]:
    """The listing's entries, and the HTML of every listing row (`views-row` / table row of
    the view) that holds no readable recall link: the HTML parser recovers silently from what
    it cannot read, so a lost row is found by looking for rows, not links."""
    doc = html_document(html)
    lost = []
    for row in doc.xpath("//div[contains(concat(' ', normalize-space(@class), ' '), ' views-row ')]"
                         " | //div[contains(@class, 'view-content')]//tbody/tr"):
        if not any(_RECALL_LINK.search(a.get("href") or "") for a in row.iter("a")):
            lost.append(lxml.html.tostring(row, encoding="unicode")[:20_000])
    return _entries(doc), lost


def _entries(doc) -> list[tuple[str, dt.date | None]]:
    entries: dict[str, dt.date | None] = {}
    for link in doc.iter("a"):
        match = _RECALL_LINK.search(link.get("href") or "")
        if not match:
            continue
        number = match.group(1).upper()
        if number not in entries or entries[number] is None:
            entries[number] = _row_date(link)
    return list(entries.items())


def _row_date(link) -> dt.date | None:
    """The date shown in the listing row of a link (a `<time datetime>` or DD/MM/YYYY), if any."""
    row = next((a for a in link.iterancestors() if a.tag == "tr" or "views-row" in (a.get("class") or "")), None)
    if row is None:
        return None
    for stamp in row.xpath(".//time/@datetime"):
        parsed = parse_date(stamp[:10])
        if parsed:
            return parsed
    match = _DMY.search(row.text_content())
    return parse_date(match.group(0)) if match else None


# ---- detail ----------------------------------------------------------------------------
def parse_detail(html: str) -> dict:
    """Recall fields of one detail page (recall_number and source_url are added by the caller)."""
    doc = html_document(html)
    fields = drupal_fields(doc)
    if not any(name in fields for name in (*FIELD_MAP, "field-r-original-publish-date")):
        raise ValueError("no recall fields on the detail page; the layout may have changed")
    record: dict = {}
    extra: dict = {}
    for name, (label, items, element) in fields.items():
        target = FIELD_MAP.get(name)
        if target:
            record[target] = (", " if name in LIST_FIELDS else "\n").join(items) or None
        elif name == "field-r-original-publish-date":
            record["recall_date"] = _publish_date(element, items)
        elif name == "field-r-date-ranges":
            record["model_year"] = year_range(y.group(0) for text in items for y in _YEAR.finditer(text))
            extra["year_ranges"] = items
        elif name == "field-product-category":
            extra["product_category"] = " / ".join(items)
        elif items:
            extra.setdefault("fields", {})[label or name] = "\n".join(items)
    title = doc.xpath("string(//h1)").strip()
    if title:
        record["summary_original"] = " ".join(title.split())
    record["extra"] = extra
    return record


def drupal_fields(doc) -> dict[str, tuple[str | None, list[str], object]]:
    """field machine name (without `field--name-`) → (label, item texts, element)."""
    found = {}
    for element in doc.xpath("//*[contains(concat(' ', normalize-space(@class), ' '), ' field ')]"
                             "[contains(@class, 'field--name-')]"):
        name = next((cls[len("field--name-"):] for cls in element.get("class").split()
                     if cls.startswith("field--name-")), None)
        if not name or name in found or name == "title":
            continue
        label_nodes = element.xpath("./*[contains(concat(' ', normalize-space(@class), ' '), ' field__label ')]")
        label = block_text(label_nodes[0]) if label_nodes else None
        items = _top_items(element)
        if items:
            texts = [block_text(item) for item in items]
        else:  # a field rendered without item wrappers: its text minus the label
            for node in label_nodes:
                node.drop_tree()
            texts = [block_text(element)]
        found[name] = (label, [text for text in texts if text], element)
    return found


def _top_items(field) -> list:
    """`field__item` elements of this field that are not inside another item (nested divs stay
    part of their item's text)."""
    items = field.xpath(".//*[contains(concat(' ', normalize-space(@class), ' '), ' field__item ')]")
    item_set = set(items)
    return [item for item in items if not any(a in item_set for a in item.iterancestors())]


def block_text(element) -> str:
    """All text inside an element; block elements and <br> become line breaks."""
    parts: list[str] = []

    def walk(node) -> None:
        tag = node.tag if isinstance(node.tag, str) else None
        if tag is None or tag in ("script", "style"):
            return  # comments, processing instructions, scripts: their tails are added by the parent
        if tag == "br":
            parts.append("\n")
        block = tag in BLOCK_TAGS
        if block:
            parts.append("\n")
        if node.text:
            parts.append(node.text)
        for child in node:
            walk(child)
            if child.tail:
                parts.append(child.tail)
        if block:
            parts.append("\n")

    walk(element)
    lines = (" ".join(line.split()) for line in "".join(parts).split("\n"))
    return "\n".join(line for line in lines if line)


def _publish_date(element, items: list[str]):
    for stamp in element.xpath(".//time/@datetime"):
        parsed = parse_date(stamp[:10])
        if parsed:
            return parsed
    text = items[0] if items else None
    if not text:
        return None
    return parse_date(text) or text  # unreadable: the model keeps it and marks the date unknown
