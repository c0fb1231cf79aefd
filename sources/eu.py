"""EU Safety Gate (ex-RAPEX): every notification of the weekly XML reports as a product alert;
the vehicle ones also as vehicle recalls.

The index `/safety-gate-alerts/api/download/weeklyReport/list/xml/en` lists every weekly
report; each report is one XML document with all alerts of that week, of every product
category. Every notification becomes a `product_alert` record (toys, cosmetics, electrical
appliances …); those in a vehicle category (see `VEHICLE_CATEGORY_EXAMPLES`) also become a
`vehicle_recall` record, exactly as before: one download of each report serves both types.
Both records carry the case number, so they are shown as the same alert. Reports are streamed
to a temp file and read with `iterparse`, so memory stays flat whatever the size.

Quirks of the source handled here (see also docs/SOURCES.md):
- every notification says `xsi:type=...MotorVehicleContentDto`, toys included, so the
  category text is the only usable filter;
- empty values come as `xsi:nil="true"`, empty CDATA, `<x/>`, `Unknown`, or a literal
  `null ` prefix (legacy reports); brand / model text may hold HTML fragments;
- `measures` is several labelled sentences glued together without separators;
- there is no per-alert date: the report date is the recall date; an alert repeated in a
  later report (addendum) keeps the date it was first published with.

The XML parser never resolves entities, never loads a DTD and never touches the network;
a document that declares a DTD at all is refused (`UnsafeXml`): the real reports never do,
and that is what XXE and entity-expansion ("billion laughs") attacks need.

This module is the source (the registry finds it here) and its walk: index → reports → dated
notifications → records. Its parts: `eu_index` (the index and the request of each entry),
`eu_report` (one report file read, streamed), `eu_text` (the text of the fields), `eu_records`
(a notification's product alert and vehicle recall).
"""
from __future__ import annotations

import logging
from typing import Iterator
from urllib.parse import urlencode

from lxml import etree

from basecrawler import BaseCrawler, Raw
from basecrawler.errors import UnexpectedContent
from basecrawler.formats.xmlsafe import UnsafeXml
from basecrawler.recordtypes import Record
from sources.eu_index import (INDEX_PATH, REPORT_PATH, WeeklyReport, ledger_data, oldest_first, parse_index,
                              read_index, report_from_ledger, report_id_from_url, report_request_path)
from sources.eu_records import (VEHICLE_CATEGORY_EXAMPLES, is_vehicle_category, product_alert_fields,
                                vehicle_recall_fields)
from sources.eu_report import ReportReader
from sources.eu_text import clean_text, split_danger, split_measures

log = logging.getLogger(__name__)

# Notifications whose first-report dates are looked up together (a report has tens of them, a
# big one tens of thousands: the chunk bounds what waits in memory).
DATES_CHUNK = 500


class EuSafetyGateCrawler(BaseCrawler):
    """EU Safety Gate weekly XML reports: every notification a product alert, the vehicle ones
    also vehicle recalls (the source's default type)."""

    source = "eu"
    country = "EU"
    source_lang = "en"
    endpoints = {"site": "https://ec.europa.eu"}
    rate_per_s = 1.0
    concurrency = 1

    def fetch(self, ctx) -> Iterator[dict]:
        reader = ReportReader(ctx.warn)
        reports = ctx.read_list_document(ctx.url("site", INDEX_PATH), read_index, name="weekly-report index",
                                         label="index", key="index_url")
        chosen = sorted((r for r in reports if self._wanted(ctx, r)), key=oldest_first)
        log.info("eu: %d weekly reports in the index, %d chosen (%s since %s)", len(reports), len(chosen),
                 ctx.mode, ctx.since or "the beginning")
        for report in chosen:
            if report.report_id is not None:
                ctx.ledger.list(report.report_id, url=report.url, listed_date=report.date_for_window,
                                data=ledger_data(report))
        # Reports not yet collected (a download that failed, a run cut short) come again,
        # whatever their date and even once they left the index.
        in_index = {r.report_id: r for r in reports if r.report_id}
        retried = [in_index.get(item.key) or report_from_ledger(item)
                   for item in ctx.ledger.retries(r.report_id for r in chosen if r.report_id)]
        first_seen: dict[str, tuple[str, bool]] = {}
        # Oldest first, retried ones included: an alert keeps the date of its first report.
        for report in sorted(chosen + retried, key=oldest_first):
            if report.report_id is None:
                ctx.dead_letter({"reference": report.reference, "url": report.url},
                                "no report id in the index entry's URL", stage="fetch", kind="unexpected",
                                url=report.url)
                continue
            with ctx.ledger.attempt(report.report_id):
                yield from self._report_items(ctx, reader, report, first_seen)

    def _wanted(self, ctx, report: WeeklyReport) -> bool:
        if report.date_for_window is None:
            log.warning("eu: index entry %s has no readable date; fetching it anyway", report.reference)
        return ctx.in_window(report.date_for_window)

    def _download(self, ctx, report: WeeklyReport):
        url = ctx.url("site", report_request_path(report))
        try:
            return url, ctx.http.download_to_file(url)
        except UnexpectedContent as exc:
            # Some deployments answer 400 unless the web-report search parameter is present.
            if exc.status != 400 or "search=" in url:
                raise
            url += "&" + urlencode({"search": f"WEB_REPORT|:|{report.report_id}"}, safe="|:")
            log.warning("eu: %s answered 400; retrying with the search parameter", report.reference)
            return url, ctx.http.download_to_file(url)

    def _report_items(self, ctx, reader: ReportReader, report: WeeklyReport,
                      first_seen: dict[str, tuple[str, bool]]) -> Iterator[dict]:
        url, download = ctx.url("site", report_request_path(report)), None
        with ctx.item({"reference": report.reference, "report_id": report.report_id}, url):
            url, download = self._download(ctx, report)  # a failed download: the next run fetches it again
        if download is None:
            return
        kept = broken = 0
        whole_report = {"reference": report.reference, "report_id": report.report_id}
        with download, ctx.item(Raw(whole_report, url=url, response_sha256=download.sha256), url,
                                failures=(etree.XMLSyntaxError, UnexpectedContent)):
            # A body cut short fails the item (a new download may be whole); an unsafe one does not.
            try:
                items = reader.read(reader.source_of(download, report), report, url,
                                    again=lambda: reader.source_of(download, report))
                for item in self._first_dated(ctx, items, first_seen):
                    if "_broken" in item:
                        broken += 1
                        ctx.dead_letter(Raw(item["_broken"], url=url, response_sha256=download.sha256),
                                        item["error"], stage="fetch", kind="unexpected")
                        continue
                    kept += item["vehicle"]
                    yield item  # the pipeline notes the report it came from
            except UnsafeXml as exc:
                ctx.dead_letter(Raw(whole_report, url=url, response_sha256=download.sha256), exc)
        log.info("eu: %s (id %s): %d vehicle notifications", report.reference, report.report_id, kept)
        seen = reader.notifications_read.pop(report.report_id, 0)
        if seen and not kept and not broken:
            # Weeks without a vehicle alert exist, but garbled categories look the same: say it.
            ctx.warn(f"{report.reference}: none of its {seen} notifications is in a vehicle category")

    def _first_dated(self, ctx, items: Iterator[dict], first_seen: dict[str, tuple[str, bool]]) -> Iterator[dict]:
        """`items` with the date of each alert's first report (`first_report_date`) and whether
        that date is the stored one (`date_stored`): the stored records are asked about
        DATES_CHUNK notifications at a time (one keyed query per record type, not one per
        notification). Notifications read before a report breaks off still come out."""
        pending: list[dict] = []
        try:
            for item in items:
                pending.append(item)
                if len(pending) >= DATES_CHUNK:
                    yield from self._dated(ctx, pending, first_seen)
                    pending = []
        except Exception:
            yield from self._dated(ctx, pending, first_seen)
            raise
        yield from self._dated(ctx, pending, first_seen)

    def _dated(self, ctx, items: list[dict], first_seen: dict[str, tuple[str, bool]]) -> list[dict]:
        new: dict[str, dict] = {}   # case → its first notification in `items`
        for item in items:
            if "_broken" not in item and item["caseNumber"] not in first_seen:
                new.setdefault(item["caseNumber"], item)
        # A vehicle alert was stored as a vehicle recall (also by stores made before product
        # alerts); any other alert only as a product alert.
        vehicles = [case for case, item in new.items() if item["vehicle"]]
        stored = {**ctx.known_dates(vehicles),
                  **ctx.known_dates([case for case, item in new.items() if not item["vehicle"]],
                                    record_type="product_alert")} if new else {}
        for case, item in new.items():
            date = stored.get(case)
            first_seen[case] = (date or item["report_date"], date is not None)
        for item in items:
            if "_broken" not in item:
                item["first_report_date"], item["date_stored"] = first_seen[item["caseNumber"]]
        return items

    def parse(self, ctx, raw: dict) -> list:
        """Every notification → a product alert; a vehicle one also → a vehicle recall (first,
        as before: its record is exactly what it was when the source kept vehicles only)."""
        alert = Record("product_alert", product_alert_fields(raw))
        return [vehicle_recall_fields(raw), alert] if raw.get("vehicle", True) else [alert]


# What tests, fixtures and benchmarks import from the source module, wherever it lives now.
__all__ = ["DATES_CHUNK", "INDEX_PATH", "REPORT_PATH", "VEHICLE_CATEGORY_EXAMPLES", "EuSafetyGateCrawler",
           "WeeklyReport", "clean_text", "is_vehicle_category", "parse_index", "read_index", "report_id_from_url",
           "report_request_path", "split_danger", "split_measures"]
