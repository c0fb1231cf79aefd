"""EU Safety Gate: the weekly-report index — its entries, the request each one becomes, and
what the list ledger keeps to ask for a report again once it has left the index.
"""
from __future__ import annotations

import datetime as dt
import re
from contextlib import suppress
from dataclasses import dataclass
from typing import IO
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from basecrawler.fetch.urls import path_segment
from basecrawler.formats.dates import parse_date
from basecrawler.formats.xmlsafe import ListRead, read_list
from sources.eu_text import clean_text, local_name

INDEX_PATH = "/safety-gate-alerts/api/download/weeklyReport/list/xml/en"
REPORT_PATH = "/safety-gate-alerts/api/download/weeklyReport/detail/xml/{id}"
_REPORT_ID_RE = re.compile(r"/weeklyReport/detail/xml/(\d+)")
_ANY_ID_RE = re.compile(r"(?:WEB_REPORT\|:\||/)(\d{1,9})(?:$|[/?&|])")


@dataclass
class WeeklyReport:
    reference: str | None
    published: dt.date | None
    year: int | None
    week: int | None
    url: str | None            # as the index gives it, stray comma removed
    report_id: str | None

    @property
    def date_for_window(self) -> dt.date | None:
        if self.published:
            return self.published
        if self.year and self.week:
            with suppress(ValueError):
                return dt.date.fromisocalendar(self.year, self.week, 5)  # reports come out on Fridays
        return None


def report_id_from_url(url: str | None) -> str | None:
    if not url:
        return None
    m = _REPORT_ID_RE.search(url)
    if m:
        return m.group(1)
    m = _ANY_ID_RE.search(url.replace("%7C", "|").replace("%7c", "|"))
    return m.group(1) if m else None


def parse_index(source: bytes | str | IO[bytes], header: str | None = None) -> list[WeeklyReport]:
    """Entries of the weekly-report index (bytes, a path or a binary file)."""
    if not isinstance(source, bytes):
        if isinstance(source, str):
            with open(source, "rb") as handle:
                source = handle.read()
        else:
            source = source.read()
    return read_index(source, header=header)[0]


def read_index(body: bytes, header: str | None = None) -> tuple[list[WeeklyReport], ListRead]:
    """Entries of the index and how it was read: the index is small and a list, so an
    almost-XML index (a bare `&`, a stray control character, one broken entry) still yields
    every readable entry (`xmlsafe.read_list`), decoded by declaration and content."""
    listed = read_list(body, "weeklyReport", header=header)
    reports = []
    for element in listed.items:
        fields = {local_name(child.tag): clean_text("".join(child.itertext())) for child in element
                  if isinstance(child.tag, str)}
        url = (fields.get("URL") or "").strip().rstrip(",").strip() or None
        reports.append(WeeklyReport(
            reference=fields.get("reference"), published=parse_date(fields.get("publicationDate")),
            year=_int(fields.get("year")), week=_int(fields.get("week")), url=url,
            report_id=report_id_from_url(url),
        ))
    return reports, listed


def _has_step(path: str) -> bool:
    """Whether a URL resolver would take a segment of `path` as a step (`.`, `..`, also
    percent-encoded), or it holds NUL: publisher data must not choose where we go."""
    return any(unquote(segment).strip() in (".", "..") or "\x00" in unquote(segment) for segment in path.split("/"))


def report_request_path(report: WeeklyReport) -> str:
    """Path and query to request for an index entry: those the index gives (what the server
    itself advertises), else the canonical detail path. The index's host is never used, so an
    endpoint override (mirror, replay, test server) applies and an index cannot send us
    elsewhere."""
    parts = urlsplit(report.url or "")
    if _REPORT_ID_RE.search(parts.path or "") and not _has_step(parts.path):
        path, query = parts.path, parse_qsl(parts.query, keep_blank_values=True)
    else:   # (an advertised path with `..` in it is not followed: the canonical one is asked)
        path, query = REPORT_PATH.format(id=path_segment(report.report_id)), []
    if not any(key == "language" for key, _ in query):
        query.insert(0, ("language", "en"))
    return path + "?" + urlencode(query, safe="|:")


def oldest_first(report: WeeklyReport):
    """Sort key: reports oldest first (an alert keeps the date of its first report)."""
    return report.date_for_window or dt.date.min, int(report.report_id or 0)


def ledger_data(report: WeeklyReport) -> dict:
    """What the ledger keeps to fetch a report again once it has left the index."""
    return {"reference": report.reference, "url": report.url, "year": report.year, "week": report.week,
            "published": report.published.isoformat() if report.published else None}


def report_from_ledger(item) -> WeeklyReport:
    data = item.data or {}
    published = data.get("published")
    return WeeklyReport(reference=data.get("reference"), published=dt.date.fromisoformat(published) if published else None,
                        year=data.get("year"), week=data.get("week"), url=data.get("url") or item.url,
                        report_id=item.key)


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None
