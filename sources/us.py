"""US NHTSA recalls: the Socrata bulk list (data.transportation.gov) and the per-campaign
detail API (api.nhtsa.gov) that adds make / model / model year.

The list announces a campaign before the detail API serves it, so the detail is a second
phase run by the enrichment ladder: a 404 or an empty result means "not yet".
"""
from __future__ import annotations

import logging
from urllib.parse import quote, urlencode

from basecrawler import BaseCrawler, NotFound, UnexpectedContent
from basecrawler.formats import jsonlimits
from basecrawler.formats.dates import parse_date
from basecrawler.model import normalize_model_year, year_range

log = logging.getLogger(__name__)

LIST_PATH = "/resource/6axg-epim.json"
DETAIL_PATH = "/recalls/campaignNumber"
PAGE_SIZE = 1000
LIST_ORDER = "report_received_date DESC,nhtsa_id"
# List columns with no Recall field of their own, kept in `extra`.
EXTRA_COLUMNS = ("mfr_campaign_number", "recall_type", "fire_risk_when_parked", "do_not_drive", "completion_rate")
# Detail flags worth keeping (whether owners should park outside, an over-the-air remedy …).
DETAIL_FLAGS = {"parkIt": "park_it", "parkOutSide": "park_outside", "overTheAirUpdate": "over_the_air_update"}


def list_query(offset: int, *, page_size: int = PAGE_SIZE, since=None, until=None) -> str:
    """Path + query of one list page, as the source requests it (also used by the fixture script)."""
    params = {"$limit": str(page_size), "$offset": str(offset), "$order": LIST_ORDER}
    conditions = []
    if since is not None:
        conditions.append(f"report_received_date >= '{since.isoformat()}T00:00:00'")
    if until is not None:
        conditions.append(f"report_received_date <= '{until.isoformat()}T23:59:59'")
    if conditions:
        params["$where"] = " AND ".join(conditions)
    return LIST_PATH + "?" + urlencode(params, quote_via=quote, safe="$,'")


def detail_query(campaign_number: str) -> str:
    return DETAIL_PATH + "?" + urlencode({"campaignNumber": campaign_number})


class UsCrawler(BaseCrawler):
    """NHTSA (United States): Socrata recall list, detail API for vehicles."""

    source = "us"
    country = "US"
    source_lang = "en"
    endpoints = {"bulk": "https://data.transportation.gov", "detail": "https://api.nhtsa.gov"}
    page_size = PAGE_SIZE

    @staticmethod
    def _headers(ctx) -> dict:
        # Some networks get 403 from Socrata without an app token; the token is optional.
        token = ctx.setting("app_token")
        return {"X-App-Token": token} if token else {}

    @staticmethod
    def _json(ctx, url: str, **kwargs):
        """A JSON answer; one nested past what the JSON reader can go (it recurses) is a clear
        refusal of that document, never a RecursionError that fails the source."""
        try:
            return ctx.http.get_json(url, **kwargs)
        except RecursionError:
            raise UnexpectedContent("the JSON answer is nested deeper than it can be read", url=url,
                                    response_sha256=ctx.http.last_sha256) from None

    def fetch(self, ctx):
        offset = 0
        while True:
            url = ctx.url("bulk", list_query(offset, page_size=self.page_size, since=ctx.since, until=ctx.until))
            page = self._json(ctx, url, headers=self._headers(ctx))
            if not isinstance(page, list):
                raise UnexpectedContent(f"list page is not a JSON array: {str(page)[:200]}", url=url,
                                        response_sha256=ctx.http.last_sha256)
            log.info("us: list page at offset %d: %d rows", offset, len(page))
            # Each row under the structural limits: one nested too deep is its own dead letter.
            yield from jsonlimits.checked_items(page)  # the pipeline notes the page each row came from
            if len(page) < self.page_size:
                return
            offset += len(page)

    def parse(self, ctx, raw):
        link = raw.get("recall_link")
        return {
            "recall_number": raw["nhtsa_id"],
            "recall_date": raw.get("report_received_date"),
            "manufacturer_original": raw.get("manufacturer"),
            "component_original": raw.get("component"),
            "summary_original": raw.get("subject"),
            "defect_cause_original": raw.get("defect_summary"),
            "consequence_original": raw.get("consequence_summary"),
            "remedy_original": raw.get("corrective_action"),
            "affected_units": raw.get("potentially_affected"),
            "source_url": link.get("url") if isinstance(link, dict) else link,
            "extra": {k: raw[k] for k in EXTRA_COLUMNS if raw.get(k) not in (None, "")},
        }

    def fetch_detail(self, ctx, recall: dict) -> dict | None:
        url = ctx.url("detail", detail_query(recall["recall_number"]))
        envelope = self._json(ctx, url)
        results = envelope.get("results") if isinstance(envelope, dict) else None
        if not isinstance(results, list):
            raise UnexpectedContent(f"detail envelope without a results list: {str(envelope)[:200]}", url=url,
                                    response_sha256=ctx.http.last_sha256)
        if not results or not envelope.get("Count", len(results)):
            # The list announced it, the detail API does not serve it yet.
            raise NotFound(f"no detail results yet for {recall['recall_number']}", url=url)
        return detail_fields(results, recall)


def detail_fields(results: list[dict], recall: dict) -> dict:
    """Many detail rows (one per make / model / year) → the fields the list lacks."""
    vehicles = []
    for row in results:
        # ModelYear 9999 marks equipment or an unknown year: kept as None, like everywhere else.
        vehicle = {"make": _text(row.get("Make")), "model": _text(row.get("Model")),
                   "model_year": normalize_model_year(row.get("ModelYear"))}
        if any(vehicle.values()) and vehicle not in vehicles:
            vehicles.append(vehicle)
    models = sorted({v["model"] for v in vehicles if v["model"]})
    fields: dict = {
        "model_original": ", ".join(models) or None,
        "model_year": year_range(v["model_year"] for v in vehicles if v["model_year"]),
        "extra": {"vehicles": vehicles},
    }
    first = results[0]
    for key, name in DETAIL_FLAGS.items():
        if first.get(key) is not None:
            fields["extra"][name] = first[key]
    received = parse_date(first.get("ReportReceivedDate"))  # DD/MM/YYYY in the detail API
    if received:
        fields["extra"]["detail_report_received_date"] = received.isoformat()
        if recall.get("date_unknown"):
            fields["recall_date"] = received
            fields["date_unknown"] = False
    # The list usually carries these; the detail only fills a gap, never overrides the list.
    for field, key in (("manufacturer_original", "Manufacturer"), ("component_original", "Component"),
                       ("defect_cause_original", "Summary"), ("consequence_original", "Consequence"),
                       ("remedy_original", "Remedy"), ("affected_units", "PotentialNumberofUnitsAffected")):
        if recall.get(field) is None and _text(first.get(key)) is not None:
            fields[field] = first[key]
    return fields


def _text(value) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None
