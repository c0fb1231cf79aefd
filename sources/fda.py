"""openFDA enforcement reports: recalls of food, drugs and medical devices (US Food and Drug
Administration), as `product_alert` records.

Where the data comes from: `/food/enforcement.json`, `/drug/enforcement.json`,
`/device/enforcement.json` on api.fda.gov, answering `{"meta": {..., "results": {"skip",
"limit", "total"}}, "results": [...]}`. Paging is `limit` (≤ 1000) and `skip`, and the API
refuses a `skip` past its cap (25,000): a long walk cannot page through. So each product kind is
walked by `report_date` windows (`search=report_date:[YYYYMMDD+TO+YYYYMMDD]`): a window whose
`total` is more than `skip` can reach is split in two halves and each half asked again, until
every window can be paged to its end — no record is skipped. A window that cannot be split (one
report date with more records than the cap) is one dead letter naming it, loudly.

Without `--since` / `--until` the walk spans 1900-01-01..2099-12-31: bounds that do not move
with the clock (a walk asks the same questions on every day it finds the same data, so a
replay set keeps answering); empty halves cost one small 404 each.

Answers: a 404 whose body is an `error` object (`NOT_FOUND`) means "no match" (an empty
window), not a failure; a 200 with an `error` object or without a `results` list is a failure of
that window (a dead letter, the body in the archive); the other windows go on. The same recall
number seen twice in one run (a record that moved between windows while the walk ran) is one
record (the pipeline counts the second as merged).

Rules (see also fixtures/fda/README.md):
- Identity: `recall_number` (F-/D-/Z-NNNN-YYYY, one per product), kept in `recall_number` too;
  `event_id` (one recall event covering several recall numbers) in `event_id`, searchable.
- Date: `report_date` (the weekly enforcement report that published it; the walk's date too);
  the other dates (`recall_initiation_date`, `center_classification_date`, `termination_date`)
  ISO in extra. Dates are `YYYYMMDD`; the older report shape's MM/DD/YYYY is read too.
- Facets: `classification` → `risk_class`, `status`, `recalling_firm` → `company`,
  `product_type` → `category`, `distribution_pattern` → `distribution` (the published text is
  kept in extra; the facet lists "Nationwide", "International" and the US states it names).
- The older report shape (hyphenated names: `product-description`, `report-date`) is read as
  the same fields.
"""
from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import re
from typing import Iterator
from urllib.parse import quote, urlencode

from basecrawler import BaseCrawler, Transient, NotFound, UnexpectedContent
from basecrawler.formats import text as text_rules

log = logging.getLogger(__name__)

PATHS = {"food": "/food/enforcement.json", "drug": "/drug/enforcement.json", "device": "/device/enforcement.json"}
PAGE_SIZE = 1000     # the API's largest `limit`
SKIP_CAP = 25_000    # the API's largest `skip`
EARLIEST, LATEST = dt.date(1900, 1, 1), dt.date(2099, 12, 31)

# Reader-visible messages of this module (Korean first, English beside), in one place.
MESSAGES = {
    "unsplittable": "나눌 수 없는 창 / a window that cannot be split: {total} records on report date {day} "
                    "({kind}), more than skip can reach ({reach})",
    "error_200": "오류 응답 (200) / an error answered with 200 for {kind} {window}: {error}",
    "no_results": "results 목록 없음 / no results list for {kind} {window}: {text}",
    "not_found": "오류 객체 없는 404 / a 404 without an error object for {kind} {window}",
}

KNOWN_FIELDS = frozenset({
    "recall_number", "event_id", "status", "classification", "voluntary_mandated", "initial_firm_notification",
    "recalling_firm", "address_1", "address_2", "city", "state", "postal_code", "country", "product_type",
    "product_description", "product_quantity", "code_info", "more_code_info", "reason_for_recall",
    "distribution_pattern", "recall_initiation_date", "center_classification_date", "report_date",
    "termination_date", "openfda",
})
EXTRA_TEXT = ("voluntary_mandated", "initial_firm_notification", "product_quantity", "code_info", "more_code_info",
              "distribution_pattern")
EXTRA_DATES = ("recall_initiation_date", "center_classification_date", "termination_date")

STATES = {
    "AL": "Alabama", "AK": "Alaska", "AZ": "Arizona", "AR": "Arkansas", "CA": "California", "CO": "Colorado",
    "CT": "Connecticut", "DE": "Delaware", "FL": "Florida", "GA": "Georgia", "HI": "Hawaii", "ID": "Idaho",
    "IL": "Illinois", "IN": "Indiana", "IA": "Iowa", "KS": "Kansas", "KY": "Kentucky", "LA": "Louisiana",
    "ME": "Maine", "MD": "Maryland", "MA": "Massachusetts", "MI": "Michigan", "MN": "Minnesota",
    "MS": "Mississippi", "MO": "Missouri", "MT": "Montana", "NE": "Nebraska", "NV": "Nevada",
    "NH": "New Hampshire", "NJ": "New Jersey", "NM": "New Mexico", "NY": "New York", "NC": "North Carolina",
    "ND": "North Dakota", "OH": "Ohio", "OK": "Oklahoma", "OR": "Oregon", "PA": "Pennsylvania",
    "RI": "Rhode Island", "SC": "South Carolina", "SD": "South Dakota", "TN": "Tennessee", "TX": "Texas",
    "UT": "Utah", "VT": "Vermont", "VA": "Virginia", "WA": "Washington", "WV": "West Virginia",
    "WI": "Wisconsin", "WY": "Wyoming", "DC": "District of Columbia", "PR": "Puerto Rico",
}
_STATE_NAME_RE = re.compile(r"\b(" + "|".join(sorted(STATES.values(), key=len, reverse=True)) + r")\b", re.IGNORECASE)
_STATE_CODE_RE = re.compile(r"(?<![A-Za-z])(" + "|".join(STATES) + r")(?![A-Za-z])")
_BY_NAME = {name.lower(): code for code, name in STATES.items()}
# Codes that are also English words in an all-capitals sentence ("DISTRIBUTED IN CA"): read
# there only as names, never as codes (a bare list of codes, "OH, CA", is codes).
_WORD_CODES = frozenset({"IN", "OR", "ME", "OK", "HI", "DE", "LA", "PA", "MA", "OH", "ID", "AL", "CO"})
_CODE_LIST_RE = re.compile(r"[A-Z]{2}(?:\s*(?:,|;|/|&|AND)\s*[A-Z]{2})*\.?")   # "OH, CA": codes only
_NATIONWIDE_RE = re.compile(r"nation\s*-?\s*wide|all\s+(?:50\s+)?states|throughout\s+the\s+(?:u\.?s\.?a?|united states)",
                            re.IGNORECASE)
_INTERNATIONAL_RE = re.compile(r"world\s*-?\s*wide|international|foreign|outside\s+(?:of\s+)?the\s+u", re.IGNORECASE)
_RECALL_NUMBER_RE = re.compile(r"^[A-Z]-\d{1,5}-\d{2,4}$")


def search_query(start: dt.date, end: dt.date, skip: int, limit: int) -> str:
    """The query of one page, as the API documents it (`report_date:[A+TO+B]`). Only our own
    dates and numbers go in; nothing a publisher wrote."""
    params = {"search": f"report_date:[{start:%Y%m%d}+TO+{end:%Y%m%d}]", "limit": str(limit), "skip": str(skip),
              "sort": "report_date:asc"}
    return urlencode(params, quote_via=quote, safe=":[]+")


def split(start: dt.date, end: dt.date) -> list[tuple[dt.date, dt.date]]:
    middle = start + (end - start) // 2
    return [(start, middle), (middle + dt.timedelta(days=1), end)]


clean = text_rules.plain_text   # HTML in a field that should be plain text


def fda_date(value) -> str | None:
    """`YYYYMMDD` (or the older MM/DD/YYYY) → ISO; None when it is no date."""
    text = clean(value)
    if not text:
        return None
    try:
        if len(text) == 8 and text.isdigit():
            return dt.date(int(text[:4]), int(text[4:6]), int(text[6:])).isoformat()
        if re.fullmatch(r"\d{1,2}/\d{1,2}/\d{4}", text):
            month, day, year = (int(part) for part in text.split("/"))
            return dt.date(year, month, day).isoformat()
    except ValueError:
        return None
    return None


def distribution(value) -> list[str]:
    """The facet values of a distribution pattern: Nationwide, International, US states."""
    text = clean(value)
    if not text:
        return []
    found = []
    if _NATIONWIDE_RE.search(text):
        found.append("Nationwide")
    if _INTERNATIONAL_RE.search(text):
        found.append("International")
    codes = [_BY_NAME[m.group(1).lower()] for m in _STATE_NAME_RE.finditer(text)]
    shouting = not any(ch.islower() for ch in text) and not _CODE_LIST_RE.fullmatch(text)
    codes += [m.group(1) for m in _STATE_CODE_RE.finditer(text) if not (shouting and m.group(1) in _WORD_CODES)]
    return found + sorted(set(codes))


def normalised(raw: dict) -> dict:
    """Field names of today's API (the older report's `product-description` → `product_description`)."""
    if all("-" not in key for key in raw):
        return raw
    return {key.replace("-", "_"): value for key, value in raw.items()}


class FdaCrawler(BaseCrawler):
    """openFDA enforcement reports (United States): food, drugs, devices; walked by report date."""

    source = "fda"
    country = "US"
    source_lang = "en"
    record_type = "product_alert"
    endpoints = {"api": "https://api.fda.gov"}
    page_size = PAGE_SIZE
    skip_cap = SKIP_CAP

    def _headers(self, ctx) -> dict:
        # An API key is optional (it raises the rate limit); it goes in a header, never the URL.
        key = ctx.setting("api_key")
        return {"Authorization": "Basic " + base64.b64encode(f"{key}:".encode()).decode()} if key else {}

    def fetch(self, ctx) -> Iterator[dict]:
        for kind, path in PATHS.items():
            count = 0
            for record in self._walk(ctx, kind, path):
                count += 1
                yield {"endpoint": kind, "record": record}
            log.info("fda: %s: %d enforcement records", kind, count)

    def _walk(self, ctx, kind: str, path: str) -> Iterator[dict]:
        reach = self.skip_cap + self.page_size
        pending = [(ctx.since or EARLIEST, ctx.until or LATEST)]
        while pending:
            start, end = pending.pop()
            window = f"{start:%Y%m%d}..{end:%Y%m%d}"
            skip = 0
            while True:
                url = ctx.url("api", path) + "?" + search_query(start, end, skip, self.page_size)
                page = None
                # A wrong answer is this window's dead letter; a host still unreachable after the retries
                # is the source's failure (the next run asks again), not one letter per window.
                with ctx.item({"endpoint": kind, "window": window, "skip": skip, "url": url}, url,
                              passes=(Transient,)):
                    page = self._page(ctx, url, kind, window)
                if page is None:   # a dead letter (this window's rest is lost, the others go on)
                    break
                total, results = page
                if skip == 0 and total > reach:
                    if start == end:
                        ctx.dead_letter({"endpoint": kind, "window": window, "total": total, "url": url},
                                        UnexpectedContent(MESSAGES["unsplittable"].format(
                                            total=total, day=f"{start:%Y%m%d}", kind=kind, reach=reach), url=url),
                                        stage="fetch", url=url)
                        break
                    pending.extend(reversed(split(start, end)))   # oldest half first
                    break
                yield from results
                skip += self.page_size
                if not results or skip >= total or skip > self.skip_cap:
                    break

    def _page(self, ctx, url: str, kind: str, window: str) -> tuple[int, list] | None:
        """(total, results) of one page; (0, []) for the API's "no match"; raises for a failure."""
        try:
            body = ctx.http.get_json(url, headers=self._headers(ctx))
        except NotFound as exc:
            if _is_no_match(exc.body):
                return 0, []
            raise UnexpectedContent(MESSAGES["not_found"].format(kind=kind, window=window), url=url, status=404,
                                    body=exc.body, response_sha256=exc.response_sha256) from None
        if isinstance(body, dict) and "error" in body:
            raise UnexpectedContent(MESSAGES["error_200"].format(kind=kind, window=window,
                                                                 error=str(body["error"])[:200]), url=url)
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list):
            raise UnexpectedContent(MESSAGES["no_results"].format(kind=kind, window=window, text=str(body)[:200]),
                                    url=url)
        meta = (body.get("meta") or {}).get("results") or {}
        total = meta.get("total") if isinstance(meta, dict) else None
        return (int(total) if isinstance(total, (int, float)) else len(results)), results

    def parse(self, ctx, raw: dict) -> dict:
        if isinstance(raw, dict) and "record" in raw and "endpoint" in raw:
            raw = raw["record"]
        if not isinstance(raw, dict):
            raise ValueError(f"an enforcement record is not a JSON object: {str(raw)[:100]}")
        raw = normalised(raw)
        number = clean(raw.get("recall_number"))
        if not number:
            raise ValueError("enforcement record without a recall_number")
        extra: dict = {key: text for key in EXTRA_TEXT if (text := clean(raw.get(key)))}
        extra.update({key: date for key in EXTRA_DATES if (date := fda_date(raw.get(key)))})
        address = [clean(raw.get(key)) for key in ("address_1", "address_2", "city", "state", "postal_code", "country")]
        if any(address):
            extra["firm_address"] = ", ".join(part for part in address if part)
        if clean(raw.get("country")):
            extra["firm_country"] = clean(raw.get("country"))
        if not _RECALL_NUMBER_RE.match(number):
            extra["recall_number_unusual"] = True
        openfda = raw.get("openfda")
        if isinstance(openfda, dict) and openfda:
            extra["openfda"] = openfda
        extra.update({key: value for key, value in raw.items() if key not in KNOWN_FIELDS and value not in (None, "", [])})
        report_date = raw.get("report_date")
        brands = openfda.get("brand_name") if isinstance(openfda, dict) else None
        return {
            "alert_id": number,
            "recall_number": number,
            "event_id": clean(raw.get("event_id")),
            "alert_date": fda_date(report_date) or clean(report_date),
            "product_original": clean(raw.get("product_description")),
            "hazard_original": clean(raw.get("reason_for_recall")),
            "category": [t] if (t := clean(raw.get("product_type"))) else [],
            "risk_class": clean(raw.get("classification")),
            "status": clean(raw.get("status")),
            "company": [f] if (f := clean(raw.get("recalling_firm"))) else [],
            "distribution": distribution(raw.get("distribution_pattern")),
            "brand": ", ".join(dict.fromkeys(b for b in brands if isinstance(b, str))) if isinstance(brands, list) and brands
            else None,
            "authority": "FDA",
            "extra": extra,
        }


def _is_no_match(body) -> bool:
    """openFDA's "no match": a 404 whose body is `{"error": {"code": "NOT_FOUND", ...}}`."""
    try:
        data = json.loads(body) if isinstance(body, (bytes, str)) and body else None
    except ValueError:
        return False
    return isinstance(data, dict) and isinstance(data.get("error"), dict)
