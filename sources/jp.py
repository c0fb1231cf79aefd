"""MLIT (Japan) recalls: press-release feed → press page → recall list PDF → one record per
届出番号 (recall notification number).

The feed (`/pressrelease.rdf`, RSS 1.0, Shift_JIS) announces every MLIT press release; the
recall ones are titled `リコールの届出について（…）` (one recall of 100+ vehicles) or
`少数台数のリコール届出の公表について` (a monthly table of small recalls). Their press page links
the PDF `リコール届出一覧表`, downloaded through the artifact manifest and read by
`basecrawler.formats.pdf` (text layer, pypdfium2 fallback, or OCR for scans). `parse()` turns the
extracted tables into records (`sources/jp_list.py`); it works on JSON only, so a dead letter
can be re-parsed later.
"""
from __future__ import annotations

import datetime as dt
import logging
import re
from contextlib import suppress
from dataclasses import dataclass
from urllib.parse import unquote, urljoin, urlsplit

from lxml import html

from basecrawler import BaseCrawler, FetchError, Raw
from basecrawler.errors import UnsafePath
from basecrawler.fetch.artifacts import ArtifactError
from basecrawler.formats.dates import parse_date
from basecrawler.formats.xmlsafe import ListRead, read_list
from sources.jp_list import records_from_list, squash, text_line_fields

log = logging.getLogger(__name__)

FEED_PATH = "/pressrelease.rdf"
SITE_HOST = "www.mlit.go.jp"
RECALL_TITLE_RE = re.compile(r"^\s*(リコールの届出について|少数台数のリコール届出の公表について)")
LIST_LINK_TEXT = "リコール届出一覧表"
RSS = "{http://purl.org/rss/1.0/}"
DC = "{http://purl.org/dc/elements/1.1/}"



@dataclass
class FeedItem:
    title: str
    link: str
    date: dt.date | None


@dataclass
class PressPage:
    url: str
    title: str | None
    date: dt.date | None
    list_pdf: str | None


class JpCrawler(BaseCrawler):
    """MLIT recall press releases (feed → press page → PDF table, OCR for scans)."""

    source = "jp"
    country = "JP"
    source_lang = "ja"
    endpoints = {"site": "https://www.mlit.go.jp"}
    rate_per_s = 1.0
    concurrency = 2
    ocr_dpi = 300
    # The monthly small-batch list is published up to ~5 weeks after the first 届出日 it lists
    # (its recall_date); a 14-day incremental overlap would drop those rows as out of range.
    min_overlap_days = 45

    def fetch(self, ctx):
        feed_url = ctx.url("site", FEED_PATH)
        items = ctx.read_list_document(feed_url, read_feed, name="press-release feed", label=f"feed {FEED_PATH}",
                                       key="feed_url")
        sha = ctx.http.last_sha256  # the feed's: letters about its items point at it
        recalls = [item for item in items if RECALL_TITLE_RE.match(item.title)]
        if not recalls:
            # Garbled titles or a new title wording would otherwise skip every recall silently.
            ctx.warn(f"feed {FEED_PATH}: none of its {len(items)} items is titled as a recall press release")
        chosen: dict[str, tuple[FeedItem, str]] = {}
        for item in recalls:
            if not item.link:
                ctx.dead_letter(Raw({"feed_url": feed_url, "title": item.title}, url=feed_url, response_sha256=sha),
                                "recall item of the feed without a link", stage="fetch", kind="unreadable_item")
                continue
            if not ctx.in_window(item.date):
                continue
            try:
                press_url = self._site_url(ctx, item.link)
            except UnsafePath as exc:   # the feed must not choose a path by dot segments: refused, kept
                ctx.dead_letter(Raw({"feed_url": feed_url, "title": item.title, "link": item.link}, url=feed_url,
                                    response_sha256=sha), exc, stage="fetch")
                continue
            if press_url is None:
                log.warning("jp: feed item outside %s skipped: %s", SITE_HOST, item.link)
                continue
            key = _ledger_key(item.link)
            chosen[key] = (item, press_url)
            ctx.ledger.list(key, url=item.link, listed_date=item.date,
                            data={"title": item.title, "link": item.link,
                                  "date": item.date.isoformat() if item.date else None})
        # Press releases not yet collected (a page that answered 404, a PDF that failed) come
        # again whatever their date, even once they scrolled out of the 50-item feed.
        for entry in ctx.ledger.retries(chosen):
            data = entry.data or {}
            item = FeedItem(data.get("title") or "", data.get("link") or entry.url or "",
                            dt.date.fromisoformat(data["date"]) if data.get("date") else None)
            with suppress(UnsafePath):   # (refused when it was listed: never requested)
                press_url = self._site_url(ctx, item.link)
                if press_url is not None:
                    chosen[entry.key] = (item, press_url)
        for key, (item, press_url) in chosen.items():
            with ctx.ledger.attempt(key) as attempt:
                produced = self._press_release(ctx, item, press_url, attempt)
                if produced is not None:
                    yield produced

    def _press_release(self, ctx, item: FeedItem, press_url: str, attempt=None) -> Raw | None:
        """The press release's list PDF, read; None when it is lost (dead letter). A loss
        that a later fetch can mend fails the ledger attempt, so the next run comes back."""
        facts = {"press_url": press_url, "press_title": item.title,
                 "feed_date": item.date.isoformat() if item.date else None}
        with ctx.item(Raw(facts, url=press_url), failures=(FetchError,)) as fetched:
            press = self._press_page(ctx, press_url)
        if fetched.failed:
            return None
        if press.list_pdf is None:
            message = f"no {LIST_LINK_TEXT} PDF linked from the press page"
            ctx.dead_letter(Raw(facts, url=press_url), message, kind="unexpected")
            if attempt is not None:
                attempt.fail(message)
            return None
        facts.update(press_date=press.date.isoformat() if press.date else None, pdf_url=press.list_pdf)

        def rediscover() -> str:
            return self._press_page(ctx, press_url).list_pdf or press.list_pdf

        with ctx.item(Raw(facts, url=press.list_pdf), failures=(ArtifactError, FetchError)) as downloaded:
            artifact = ctx.documents.get(press.list_pdf, target=f"jp:{urlsplit(press_url).path}#{LIST_LINK_TEXT}",
                                         rediscover=rediscover)
        if downloaded.failed:
            return None
        facts.update(pdf_url=artifact.url, pdf_sha256=artifact.sha256)
        if artifact.drifted:
            facts["pdf_changed"] = True
        from basecrawler.formats.pdf import OcrUnavailable, PdfError   # a crawl of another source never needs it

        try:
            pages = self._read_pdf(ctx, artifact.path)
        except (PdfError, OcrUnavailable) as exc:
            # A parse-stage letter without pages: `dead-letters retry` reads the archived PDF
            # again (e.g. once tesseract is installed, or with a higher page cap) instead of
            # needing a new crawl. Kind: parse_error, encrypted or too_big.
            ctx.dead_letter(Raw(facts, url=artifact.url, response_sha256=artifact.sha256), exc,
                            stage="parse", kind=exc.kind)
            return None
        facts["pages"] = [page.to_dict() for page in pages]
        return Raw(facts, url=artifact.url, response_sha256=artifact.sha256)

    def _read_pdf(self, ctx, source):
        from basecrawler.formats.pdf import read_pdf

        # The page and OCR limits are the run's settings (BASECRAWLER_PDF_MAX_PAGES, …), which
        # travel with the run's HTTP client: the context has no other door to them.
        settings = ctx.http.settings
        return read_pdf(source, dpi=self.ocr_dpi, max_pages=settings.pdf_max_pages,
                        max_ocr_seconds=settings.ocr_max_seconds)

    def _press_page(self, ctx, url: str) -> PressPage:
        text = ctx.http.get_text(url, encoding="utf-8", expect="html")
        return parse_press_page(text, url, site_url=lambda link: self._site_url(ctx, link))

    def _site_url(self, ctx, link: str) -> str | None:
        """The feed and pages link http://www.mlit.go.jp/...; requests go to the (overridable)
        site endpoint with the same path."""
        parts = urlsplit(link)
        if parts.netloc and parts.hostname != SITE_HOST:
            return None
        return ctx.url("site", plain_path(parts.path) + (f"?{parts.query}" if parts.query else ""))

    def parse(self, ctx, raw):
        if "pages" not in raw and raw.get("pdf_sha256"):
            raw = {**raw, "pages": [page.to_dict() for page in self._read_pdf(ctx, ctx.documents.stored(raw["pdf_sha256"]))]}
        records, rejected = records_from_list(raw)
        if not records and not rejected:
            methods = sorted({page.get("method") for page in raw.get("pages") or []})
            raise ValueError(f"no recall table recognised in the list PDF (pages read as {', '.join(methods) or 'nothing'})")
        for part, reason in rejected:
            ctx.dead_letter(Raw({**{k: v for k, v in raw.items() if k != "pages"}, "rows": part},
                                url=raw.get("pdf_url"), response_sha256=raw.get("pdf_sha256")),
                            reason, stage="parse", kind="parse_error")
        return records


# ---- feed and press page --------------------------------------------------------------------

def _ledger_key(link: str) -> str:
    """A press release's ledger key: its path (http or https, mirror or not, it is one page)."""
    parts = urlsplit(link)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def parse_feed(body: bytes, header: str | None = None) -> list[FeedItem]:
    """Items of the RSS 1.0 feed (with a title and a link)."""
    return [item for item in read_feed(body, header=header)[0] if item.link]


def read_feed(body: bytes, header: str | None = None) -> tuple[list[FeedItem], ListRead]:
    """Items of the feed, and how the list was read (repairs, items lost). The feed is
    declared Shift_JIS and written in Windows-31J (NEC specials such as ①); a copy sent as
    UTF-8 under that declaration is read as UTF-8 (`textcodec`). An almost-XML feed (a bare
    `&` in one title) still yields every readable item (`xmlsafe.read_list`)."""
    listed = read_list(body, "item", header=header, default="shift_jis")
    items = []
    for node in listed.items:
        title = _squash_space(node.findtext(f"{RSS}title"))
        link = (node.findtext(f"{RSS}link") or "").strip()
        date = parse_date((node.findtext(f"{DC}date") or "").strip())
        if title:
            items.append(FeedItem(title, link, date))
    return items, listed


def _squash_space(text: str | None) -> str:
    """A title with its line breaks and runs of spaces (not the ideographic space) as one space."""
    return re.sub(r"[ \t\r\n]+", " ", text or "").strip()


def parse_press_page(text: str, url: str, *, site_url=lambda link: link) -> PressPage:
    # Already decoded (textcodec): tell lxml the bytes are UTF-8, or a page whose <meta> says
    # Shift_JIS would be decoded a second time into mojibake.
    doc = html.fromstring(text.encode("utf-8"), parser=html.HTMLParser(encoding="utf-8"))
    date_nodes = doc.xpath("//p[contains(concat(' ', normalize-space(@class), ' '), ' date ')]")
    date = parse_date(date_nodes[0].text_content().strip()) if date_nodes else None
    title_nodes = doc.xpath("//h2[contains(@class, 'title')]")
    title = title_nodes[0].text_content().strip() if title_nodes else None
    list_pdf = None
    for anchor in doc.xpath("//p[contains(concat(' ', normalize-space(@class), ' '), ' linkArrow01 ')]/a[@href]"):
        href = anchor.get("href").strip()
        if not href.lower().endswith(".pdf"):
            continue
        if squash(anchor.text_content()) == LIST_LINK_TEXT:   # 改善箇所説明図 are diagrams, not tables
            list_pdf = site_url(urljoin(url, href)) or urljoin(url, href)
            break
    return PressPage(url, title, date, list_pdf)


def plain_path(path: str) -> str:
    """A path taken whole from a publisher's link, kept only when no segment is a step a URL
    resolver would take (`.`, `..`, also percent-encoded) or holds NUL: else `UnsafePath`."""
    for segment in path.split("/"):
        decoded = unquote(segment)
        if decoded.strip() in (".", "..") or "\x00" in decoded:
            raise UnsafePath(f"refused a path with a dot segment from publisher data: {path[:200]!r}")
    return path


# What tests import from the source module: the list reading lives in sources/jp_list.py.
__all__ = ["FEED_PATH", "RECALL_TITLE_RE", "FeedItem", "JpCrawler", "PressPage", "parse_feed", "parse_press_page",
           "plain_path", "read_feed", "records_from_list", "text_line_fields"]
