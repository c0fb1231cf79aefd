"""MLIT (Japan) recalls: press-release feed → press page → recall list PDF → one record per
届出番号 (recall notification number).

The feed (`/pressrelease.rdf`, RSS 1.0, Shift_JIS) announces every MLIT press release; the
recall ones are titled `リコールの届出について（…）` (one recall of 100+ vehicles) or
`少数台数のリコール届出の公表について` (a monthly table of small recalls). Their press page links
the PDF `リコール届出一覧表`, downloaded through the artifact manifest and read by
`basecrawler.formats.pdf` (text layer, pypdfium2 fallback, or OCR for scans). `parse()` turns the
extracted tables into records; it works on JSON only, so a dead letter can be re-parsed later.
"""
from __future__ import annotations

import datetime as dt
import difflib
import logging
import re
import unicodedata
from dataclasses import dataclass
from contextlib import suppress
from urllib.parse import unquote, urljoin, urlsplit

from lxml import html

from basecrawler import BaseCrawler, FetchError, Raw
from basecrawler.errors import UnsafePath
from basecrawler.fetch.artifacts import ArtifactError
from basecrawler.formats.xmlsafe import ListRead, read_list
from basecrawler.formats.dates import parse_date
from basecrawler.formats.text import distinct_joined

log = logging.getLogger(__name__)

FEED_PATH = "/pressrelease.rdf"
SITE_HOST = "www.mlit.go.jp"
RECALL_TITLE_RE = re.compile(r"^\s*(リコールの届出について|少数台数のリコール届出の公表について)")
LIST_LINK_TEXT = "リコール届出一覧表"
RSS = "{http://purl.org/rss/1.0/}"
DC = "{http://purl.org/dc/elements/1.1/}"

# OCR'd numbers and dates below this Tesseract confidence are not trusted (left empty, flagged).
MIN_OCR_CONFIDENCE = 50.0
# An OCR'd recall date this far from the press release is a misread digit, not a date.
OCR_DATE_WINDOW = (dt.timedelta(days=-400), dt.timedelta(days=45))


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
        if _squash(anchor.text_content()) == LIST_LINK_TEXT:   # 改善箇所説明図 are diagrams, not tables
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


# ---- records from the extracted tables --------------------------------------------------------

SINGLE_LABELS = {
    "recall_number": "リコール届出番号",
    "start_date": "リコール開始日",
    "notifier": "届出者の氏名又は名称",
    "component": "不具合の部位（部品名）",
    "defect_cause": "基準不適合状態にあると認める構造、装置又は性能の状況及びその原因",
    "remedy": "改善措置の内容",
}
VEHICLE_HEADER = {
    "maker": "車名", "type_code": "型式", "name": "通称名",
    "range": "リコール対象車の車台番号の範囲及び製作期間", "units": "リコール対象車の台数", "remarks": "備考",
}
BATCH_HEADER = {
    "notifier": "届出者", "date": "届出日", "number": "届出番号", "vehicle": "車名・型式・通称名",
    "units": "対象台数", "period": "製作期間", "component": "不具合の部位等",
}
_METHOD_RANK = {"text": 0, "text-fallback": 1, "ocr": 2}


@dataclass
class _Cell:
    text: str
    conf: float | None
    method: str

    @property
    def ocr(self) -> bool:
        return self.method == "ocr"


def _rows(doc: dict):
    for p, page in enumerate(doc.get("pages") or []):
        confidence = page.get("confidence") or []
        for t, table in enumerate(page.get("tables") or []):
            for r, row in enumerate(table):
                confs = confidence[t][r] if t < len(confidence) and r < len(confidence[t]) else []
                yield p, [_Cell(text or "", confs[c] if c < len(confs) else None, page["method"])
                          for c, text in enumerate(row)], row


# ---- the other form: text fields as label + text lines above the vehicle table ---------------
# Some lists print 届出者 / 不具合の部位（部品名） / …状況及びその原因 / 改善措置の内容 as a label
# line (sometimes numbered, sometimes "label：text") followed by text lines, not as table cells.
TEXT_LINE_KEYS = ("notifier", "component", "defect_cause", "remedy")
_ENUMERATOR = re.compile(r"^(?:[（(]?[0-9一二三四五六七八九十]{1,2}[)）.．、]|[■□●○◆◇・※])")


def _text_label(squashed: str) -> tuple[str | None, str]:
    """(field, text on the same line) when a squashed line is one of the text labels."""
    line = _ENUMERATOR.sub("", squashed)
    for key in TEXT_LINE_KEYS:
        label = _squash(SINGLE_LABELS[key])
        if line.startswith(label):
            return key, line[len(label):].lstrip(":：")
        if _similar(line.rstrip(":："), label) >= 0.85:
            return key, ""
    return None, ""


def text_line_fields(page: dict) -> list[dict]:
    """The label + text fields of one page's text, one dict per recall (a new one starts at each
    リコール届出番号 after fields were found). A field's text ends at the next label, the next
    リコール届出番号, the vehicle table (a line starting 車名, or the text of a table cell)."""
    cell_lines = {_squash(line) for table in page.get("tables") or [] for row in table for cell in row
                  for line in (cell or "").split("\n") if line.strip()}
    segments: list[dict] = [{}]
    key, lines = None, []

    def close():
        if key and lines:
            segments[-1].setdefault(key, "\n".join(lines))

    for line in (page.get("text") or "").split("\n"):
        squashed = _squash(line)
        if not squashed:
            continue
        if "リコール届出番号" in squashed:
            close()
            key, lines = None, []
            if segments[-1]:
                segments.append({})
            continue
        found, rest = _text_label(squashed)
        if found:
            close()
            key, lines = found, ([rest] if rest else [])
        elif key and (squashed in cell_lines or squashed.startswith("車名")):
            close()
            key, lines = None, []
        elif key:
            lines.append(line.strip())
    close()
    return segments


def _fill_from_text_lines(recalls: list[dict], doc: dict) -> None:
    """Single-layout recalls whose text fields were not table cells take them from the label +
    text lines of the page their 届出番号 is on (k-th recall of a page ↔ k-th segment)."""
    pages = doc.get("pages") or []
    by_page: dict[int, list[dict]] = {}
    for recall in recalls:
        if recall["layout"] == "single" and "page" in recall:
            by_page.setdefault(recall["page"], []).append(recall)
    for p, on_page in by_page.items():
        if all(all(k in r["cells"] for k in TEXT_LINE_KEYS) for r in on_page):
            continue
        segments = text_line_fields(pages[p])
        for recall, fields in zip(on_page, segments):
            for key, text in fields.items():
                if not (recall["cells"].get(key) and recall["cells"][key].text):
                    recall["cells"][key] = _Cell(text, None, pages[p].get("method", "text"))


def records_from_list(doc: dict) -> tuple[list[dict], list[tuple[list, str]]]:
    """Records of one recall list PDF (either layout; text fields as table cells or as label +
    text lines), and the row groups that could not
    become a record (an unreadable 届出番号) with the reason."""
    press_date = parse_date(doc.get("press_date")) or parse_date(doc.get("feed_date"))
    recalls: list[dict] = []
    current: dict | None = None
    mode, columns = None, {}
    for page_index, cells, raw_row in _rows(doc):
        if not any(c.text for c in cells):
            continue
        header = _header_columns(cells, VEHICLE_HEADER, required=("maker", "name", "units"))
        if header:
            mode, columns = "vehicles", header
            continue
        header = _header_columns(cells, BATCH_HEADER, required=("number", "date", "units"))
        if header:
            mode, columns = "batch", header
            continue
        labelled = _label_pairs(cells)
        if labelled:
            mode = None
            if "recall_number" in labelled or current is None:
                current = _new_recall("single")
                current["page"] = page_index
                recalls.append(current)
            for key, cell in labelled.items():
                current["cells"][key] = cell
            current["rows"].append(raw_row)
            continue
        if mode == "vehicles" and current is not None:
            _vehicle_row(current, cells, columns)
            current["rows"].append(raw_row)
        elif mode == "batch":
            number = _cell(cells, columns, "number")
            if number.text or current is None or current.get("layout") != "batch":
                current = _new_recall("batch")
                recalls.append(current)
                for key in ("number", "date", "notifier", "component"):
                    current["cells"][key] = _cell(cells, columns, key)
            _batch_vehicle(current, cells, columns)
            current["rows"].append(raw_row)
    _fill_from_text_lines(recalls, doc)
    records, rejected = [], []
    for recall in recalls:
        record = _finish(recall, doc, press_date)
        if isinstance(record, str):
            rejected.append((recall["rows"], record))
        else:
            records.append(record)
    return _merge_same_number(records), rejected


def _new_recall(layout: str) -> dict:
    return {"layout": layout, "cells": {}, "vehicles": [], "flags": {}, "methods": set(), "rows": [], "total": None}


def _squash(text: str | None) -> str:
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text or ""))


def _similar(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, _squash(a), _squash(b)).ratio()


def _header_columns(cells: list[_Cell], header: dict, required: tuple) -> dict | None:
    """Column index of each field when the row is that table's header (OCR may misread a
    character or two of a header, so the match is fuzzy)."""
    columns = {}
    for field, label in header.items():
        scores = [(_similar(c.text, label), i) for i, c in enumerate(cells)]
        score, index = max(scores) if scores else (0, None)
        if score >= 0.75:
            columns[field] = index
    if all(key in columns for key in required) and len(columns) >= len(header) - 1:
        return columns
    return None


def _label_pairs(cells: list[_Cell]) -> dict:
    found = {}
    for i, cell in enumerate(cells[:-1]):
        best = max(((_similar(cell.text, label), key) for key, label in SINGLE_LABELS.items()), default=(0, None))
        if best[0] >= 0.75:
            found[best[1]] = cells[i + 1]
    return found


def _cell(cells: list[_Cell], columns: dict, key: str) -> _Cell:
    index = columns.get(key)
    if index is None or index >= len(cells):
        return _Cell("", None, cells[0].method if cells else "text")
    return cells[index]


def _vehicle_row(recall: dict, cells: list[_Cell], columns: dict) -> None:
    maker, type_code, name = (_cell(cells, columns, k) for k in ("maker", "type_code", "name"))
    units = _cell(cells, columns, "units")
    recall["methods"].update(c.method for c in cells)
    if not type_code.text and not name.text:   # the 合計 (total) row
        recall["total"] = _count(units, recall["flags"], "total_units")
        return
    chassis, period = _split_range(_cell(cells, columns, "range").text)
    previous = recall["vehicles"][-1] if recall["vehicles"] else {}
    recall["vehicles"].append({
        # A blank 車名 continues the one above (merged cells in many lists).
        "maker": _join_lines(maker.text) or previous.get("maker"),
        "type_code": _join_lines(type_code.text) or None,
        "name": _join_lines(name.text) or None,
        "chassis_range": chassis, "production_period": period,
        "units": _count(units, recall["flags"], f"vehicles[{len(recall['vehicles'])}].units"),
        "remarks": _join_lines(_cell(cells, columns, "remarks").text) or None,
    })


def _batch_vehicle(recall: dict, cells: list[_Cell], columns: dict) -> None:
    lines = [line.strip() for line in _cell(cells, columns, "vehicle").text.split("\n") if line.strip()]
    maker = lines[0] if lines else None
    type_code = lines[1] if len(lines) >= 3 else None
    name = _join_lines("\n".join(lines[2:] if len(lines) >= 3 else lines[1:])) or None
    recall["methods"].update(c.method for c in cells)
    recall["vehicles"].append({
        "maker": maker, "type_code": type_code, "name": name,
        "production_period": _join_lines(_cell(cells, columns, "period").text) or None,
        "units": _count(_cell(cells, columns, "units"), recall["flags"], f"vehicles[{len(recall['vehicles'])}].units"),
    })


def _split_range(text: str) -> tuple[str | None, str | None]:
    """車台番号の範囲及び製作期間: chassis-number range line(s), then the production period."""
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    dated = [i for i, line in enumerate(lines) if re.search(r"(令和|平成|昭和|\d{4}年)", line)]
    if not dated:
        return _join_lines("\n".join(lines)) or None, None
    first = dated[0]
    return _join_lines("\n".join(lines[:first])) or None, _join_lines("\n".join(lines[first:])) or None


def _join_lines(text: str) -> str:
    """A cell's wrapped lines as one string: Japanese wraps without a space, Latin words with one."""
    out = ""
    for line in (l.strip() for l in (text or "").split("\n")):
        if not line:
            continue
        if out and out[-1].isascii() and out[-1].isalnum() and line[0].isascii() and line[0].isalnum():
            out += " "
        out += line
    return out


_COUNT_RE = re.compile(r"^(\d{1,3}(?:,\d{3})+|\d+)台?$")


def _count(cell: _Cell, flags: dict, name: str) -> int | None:
    """A vehicle count, or None with a flag: never a guess from an unreadable cell."""
    text = _squash(cell.text)
    if not text:
        return None
    match = _COUNT_RE.match(text)
    if match and not (cell.ocr and cell.conf is not None and cell.conf < MIN_OCR_CONFIDENCE):
        return int(match[1].replace(",", ""))
    flags[name] = cell.text
    return None


def _date(cell: _Cell | None, flags: dict, name: str, press_date: dt.date | None) -> dt.date | None:
    if cell is None or not cell.text.strip():
        return None
    value = parse_date(_squash(cell.text))
    doubtful = cell.ocr and (
        (cell.conf is not None and cell.conf < MIN_OCR_CONFIDENCE)
        or (value and press_date and not (press_date + OCR_DATE_WINDOW[0] <= value <= press_date + OCR_DATE_WINDOW[1])))
    if value is None or doubtful:
        flags[name] = cell.text
        return None
    return value


_NUMBER_RE = re.compile(r"^(外-)?\d{1,5}$")


def _recall_number(cell: _Cell | None) -> str | None:
    if cell is None:
        return None
    # Only a hyphen fits between 外 (imported vehicle) and the digits; OCR gives ー or 一.
    text = re.sub(r"^外[‐-―−ー一~～]", "外-", _squash(cell.text))
    if _NUMBER_RE.match(text) and not (cell.ocr and cell.conf is not None and cell.conf < MIN_OCR_CONFIDENCE):
        return text
    if not cell.ocr and text:
        return text   # a text layer says what it says, even in an unusual format
    return None


def _finish(recall: dict, doc: dict, press_date: dt.date | None) -> dict | str:
    cells, flags = recall["cells"], recall["flags"]
    methods = recall["methods"] | {c.method for c in cells.values()}
    method = max(methods, key=lambda m: _METHOD_RANK.get(m, 0)) if methods else "text"
    batch = recall["layout"] == "batch"
    number = _recall_number(cells.get("number" if batch else "recall_number"))
    if number is None:
        raw = cells.get("number" if batch else "recall_number")
        return f"unreadable 届出番号 {raw.text if raw else ''!r} ({method})"
    date_cell = cells.get("date" if batch else "start_date")
    date_name = "notified_date" if batch else "recall_start_date"
    date = _date(date_cell, flags, date_name, press_date)
    vehicles = recall["vehicles"]
    units = [v["units"] for v in vehicles]
    affected = sum(units) if vehicles and all(u is not None for u in units) else None
    if recall["total"] is not None and affected is not None and recall["total"] != affected:
        flags["affected_units"] = f"rows sum to {affected} but the total says {recall['total']}"
        affected = None   # one of them is misread and nothing says which
    elif affected is None and recall["total"] is not None and not any(k.startswith("vehicles") for k in flags):
        affected = recall["total"]
    elif affected is None and vehicles:
        flags.setdefault("affected_units", "a vehicle count is unreadable")

    def text(key):
        cell = cells.get(key)
        return _join_lines(cell.text) or None if cell else None

    extra = {
        "layout": "small_batch" if batch else "single",
        "read_method": method,
        "notifier": text("notifier"),
        date_name: date.isoformat() if date else None,
        "vehicles": vehicles,
        "press_url": doc.get("press_url"), "press_title": doc.get("press_title"),
        "press_date": doc.get("press_date"), "pdf_url": doc.get("pdf_url"),
    }
    if recall["total"] is not None:
        extra["total_units_stated"] = recall["total"]
    if flags:
        extra["unreadable"] = flags
    if doc.get("pdf_changed"):
        extra["pdf_changed"] = True
    return {
        "recall_number": number,
        "recall_date": date or press_date,
        "manufacturer_original": distinct_joined((v["maker"] for v in vehicles), "、"),
        "model_original": distinct_joined((v["name"] for v in vehicles), "、"),
        "component_original": text("component"),
        "defect_cause_original": None if batch else text("defect_cause"),
        "remedy_original": None if batch else text("remedy"),
        "affected_units": affected,
        "source_url": doc.get("press_url"),
        "extra": extra,
    }


def _merge_same_number(records: list[dict]) -> list[dict]:
    """A recall listed on two pages (or twice) is one record."""
    merged: dict[str, dict] = {}
    for record in records:
        kept = merged.get(record["recall_number"])
        if kept is None:
            merged[record["recall_number"]] = record
            continue
        kept["extra"]["vehicles"].extend(record["extra"]["vehicles"])
        if kept["affected_units"] is not None and record["affected_units"] is not None:
            kept["affected_units"] += record["affected_units"]
        else:
            kept["affected_units"] = None
        for key, value in record.items():
            if kept.get(key) is None and value is not None:
                kept[key] = value
    return list(merged.values())
