"""EU Safety Gate: one weekly report file read into notification dicts, streamed.

The file is read with `iterparse` (memory stays flat whatever its size), after the checks a
real report needs: a legacy charset declared over UTF-8 bytes, a bare `&` or a control character
XML forbids (repaired while reading), a notification nested past libxml2's depth limit (the
report read again with the over-deep tags as text). One odd notification becomes a `_broken`
item, never the report's loss. What a reader notices it says through `warn` (the run's).
"""
from __future__ import annotations

import io
from typing import Callable, Iterator

from lxml import etree

from basecrawler.errors import UnexpectedContent
from basecrawler.formats.textcodec import LEGACY_BYTES, Utf8XmlReader, file_encoding
from basecrawler.formats.xmlrepair import RepairingXmlReader, count_repairs, flatten_deep
from basecrawler.formats.xmlsafe import XML_FORBIDDEN_CONTROL, iter_xml, release
from sources.eu_index import WeeklyReport
from sources.eu_records import is_vehicle_category
from sources.eu_text import clean_text, element_value, iso_date, local_name

FLATTEN_DEPTH = 200   # (xmlrepair.flatten_deep's default, below libxml2's 256)


def repairs_needed(path, encoding: str, errors: str) -> list[str]:
    """What a report needs repaired before it is well-formed (usually nothing); a report whose
    bytes do not decode is left to the parser, which says so."""
    try:
        if not may_need_repair(path, encoding, errors):
            return []
        return count_repairs(path, encoding, errors=errors).notes()
    except (UnicodeError, LookupError):
        return []


def may_need_repair(path, encoding: str, errors: str, chunk: int = 1 << 20) -> bool:
    """False when the report has no `&` and no control character XML forbids: then the repair
    has nothing to do and its pass (which tracks CDATA in Python) is skipped. Any `&`, inside
    CDATA or not, leaves the decision to `count_repairs`."""
    with open(path, "r", encoding=encoding, errors=errors, newline="") as handle:
        while text := handle.read(chunk):
            if "&" in text or XML_FORBIDDEN_CONTROL.search(text):
                return True
    return False


class ReportReader:
    """Reads the weekly reports of one run; counts the notifications of each (any category)."""

    def __init__(self, warn: Callable[[str], None]):
        self.warn = warn
        self.notifications_read: dict[str, int] = {}   # report id → notifications read

    def source_of(self, download, report: WeeklyReport):
        """The report file for iterparse: as it is, or re-encoded when it declares a legacy
        charset (ISO-8859-1) but is UTF-8 throughout — libxml2 would believe the declaration and
        store `MÃ¼ller` — or repaired like a list (a bare `&`, a control character XML forbids)
        so one careless notification does not cost the report. Checked by streaming, so memory
        stays flat."""
        declared, actual = file_encoding(download.path, header=download.response.charset_encoding)
        encoding, errors = ("utf-8", LEGACY_BYTES) if actual == LEGACY_BYTES else (actual or declared or "utf-8", "strict")
        repairs = repairs_needed(download.path, encoding, errors)
        if actual is None and not repairs:
            return str(download.path)
        if actual == LEGACY_BYTES:
            # One Latin-1 name pasted into a UTF-8 report must not cost the report's other alerts.
            self.warn(f"{report.reference}: bytes that are not UTF-8 in a {declared or 'UTF-8'} report; read as cp1252")
        elif actual:
            self.warn(f"{report.reference}: declared {declared} but the body is valid UTF-8; read as UTF-8")
        if repairs:
            self.warn(f"{report.reference}: not well-formed XML: {'; '.join(repairs)} (repaired while reading)")
            return RepairingXmlReader(download.path, encoding, errors=errors)
        return Utf8XmlReader(download.path, encoding, errors=errors)

    def read(self, source, report: WeeklyReport, url: str, again=None) -> Iterator[dict]:
        """The notifications of one report (`source`: a path or what `source_of` gives), each
        its fields plus the report's; `again()` gives the source anew for a second reading."""
        header: dict = {}
        read = 0
        try:
            for item in self._report_elements(source, header, report, url):
                read += 1
                yield item
        except etree.XMLSyntaxError as exc:
            if again is None or "Excessive depth" not in str(exc):
                raise
            # One notification nested past libxml2's 256 levels must not cost the others: the
            # report read again with the over-deep tags as text (xmlrepair.flatten_deep), the
            # notifications already read skipped.
            yield from self._read_flattened(again(), report, url, skip=read)
        finally:
            if hasattr(source, "close"):
                source.close()

    def _read_flattened(self, source, report: WeeklyReport, url: str, *, skip: int) -> Iterator[dict]:
        if isinstance(source, str):
            with open(source, "rb") as handle:
                body = handle.read()
        else:
            with source:
                body = source.read()
        body, flattened = flatten_deep(body)
        self.warn(f"{report.reference}: {flattened} tag(s) nested deeper than {FLATTEN_DEPTH} levels read as text")
        for index, item in enumerate(self._report_elements(io.BytesIO(body), {}, report, url)):
            if index >= skip:
                yield item

    def _report_elements(self, source, header: dict, report: WeeklyReport, url: str) -> Iterator[dict]:
        depth = 0   # of the element an event is about: the root is 1 (cheaper than getparent())
        for event, element in iter_xml(source):
            if event == "start":
                depth += 1
                if depth == 1 and local_name(element.tag) != "Safety-Gate":
                    raise UnexpectedContent(f"not a Safety Gate report (root <{local_name(element.tag)}>)", url=url)
                continue
            depth -= 1
            if depth != 1:
                continue  # only direct children of the root are complete units
            name = local_name(element.tag)
            if name != "notifications":
                header[name] = clean_text("".join(element.itertext()))
                continue
            self.notifications_read[report.report_id] = self.notifications_read.get(report.report_id, 0) + 1
            try:
                item = self._notification(element, header, report)
                item["vehicle"] = is_vehicle_category(item.get("category"))
                yield item
            except Exception as exc:  # one odd notification must not cost the report
                snippet = etree.tostring(element, encoding="unicode")[:20000]
                yield {"_broken": snippet, "error": f"{type(exc).__name__}: {exc}"}
            release(element)

    def _notification(self, element: etree._Element, header: dict, report: WeeklyReport) -> dict:
        item: dict = {}
        for child in element:
            if isinstance(child.tag, str):
                item[local_name(child.tag)] = element_value(child)
        if not item.get("caseNumber"):
            raise ValueError("notification without a caseNumber")
        report_date = header.get("report_date")
        item.update({
            "report_date": iso_date(report_date) or report_date,
            "report_year": header.get("report_year"), "report_week": header.get("report_week"),
            "report_addendum": header.get("report_addendum"), "report_id": report.report_id,
            "report_reference": report.reference,
        })
        return item
