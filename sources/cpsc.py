"""US Consumer Product Safety Commission recalls: the public Recall REST API of SaferProducts.gov
(`/RestWebServices/Recall?format=json`), as `product_alert` records.

Where the data comes from: one JSON array per question, filtered by `RecallDateStart` /
`RecallDateEnd`. The API has no paging and silently ignores a parameter it does not know (a
misspelled filter answers every recall, ~10,000, ~27 MB), and an error can come back as HTTP
200 with one "record" whose `RecallID` is 0. So the source asks in date windows and trusts an
answer only when it could be the window's: an answer with more records than the window could
hold, a record dated outside the window, a `RecallID` 0 or a body that is not a JSON array is a
failure of that window (one dead letter naming the window, the body kept in the archive by
sha256), never data; the other windows go on.

Windows: one per calendar year from 1973 (the Commission's first year; the first window has no
start, so nothing older is missed) up to 2025, then one open window from 2026-01-01 (no end).
The grid does not move with the clock: a walk asks the same questions on every day it finds
the same data, so a replay set keeps answering; the open window's expected size grows with
the days it spans. A run's `--since` / `--until` clip the grid.

Each answer is streamed to a temp file and read twice with ijson (check, then yield): flat
memory whatever the size, and nothing of a failed window is ever yielded.

Rules (see also fixtures/cpsc/README.md):
- Identity: `RecallID` (stable, an integer) is the alert id; `RecallNumber` (the press-release
  number, what OECD's `EN/US/<n>` ids carry) is kept in `recall_number`, the field the
  cross-publisher grouping matches.
- Text: HTML tags and entities dropped, white space squashed.
- Facets: product types (`Products[].Type`) as `category`; hazard types as `hazard_type`
  (`Hazards[].HazardType` when published, which it usually is not; else from keywords of the
  hazard text, marked in extra); countries of manufacture as `made_in`; manufacturers,
  importers and distributors as `company`. Retailers (often a sentence) stay in extra.
- Kept in extra: products (name, description, model, type, category id, units), images,
  injuries, every company list by role, UPCs, remedy options, joint recalls, consumer contact,
  the last publish date, and any field the API adds.
"""
from __future__ import annotations

import datetime as dt
import logging
import math
import re
from typing import Iterator

import httpx
import ijson

from basecrawler import BaseCrawler, Transient, UnexpectedContent
from basecrawler.formats import text as text_rules
from basecrawler.formats.dates import parse_date

log = logging.getLogger(__name__)

RECALL_PATH = "/RestWebServices/Recall"
FIRST_YEAR = 1973
OPEN_FROM = dt.date(2026, 1, 1)   # the grid's last, open window starts here (see the module doc)
# What a window may hold before its answer is taken for an ignored filter: CPSC announces
# 300-500 recalls a year; three times the busiest year, and never less than MIN_WINDOW_RECORDS.
MAX_RECORDS_PER_YEAR = 1500
MIN_WINDOW_RECORDS = 200
EDGE_DAYS = 1   # a record dated this close outside its window is the API's rounding, not a leak

# Reader-visible messages of this module (Korean first, English beside), in one place.
MESSAGES = {
    "too_many": "창의 응답이 너무 큼 / window answer too large: {count}+ records for {window} (at most {cap} "
                "expected): the API ignored the date filter",
    "outside": "창 밖의 날짜 / records outside the window: {count} of them in {window} (e.g. RecallID {example} "
               "dated {date}): the API ignored the date filter",
    "zero_id": "RecallID 0 (오류 응답 / an error answered as a record) in {window}: {text}",
    "not_array": "JSON 배열이 아님 / not a JSON array for {window} (starts {head!r})",
    "not_object": "레코드가 JSON 객체가 아님 / a record that is not a JSON object in {window}: {text}",
    "broken": "JSON이 끊김 / the answer breaks after {count} records for {window}: {error}",
}

KNOWN_FIELDS = frozenset({
    "RecallID", "RecallNumber", "RecallDate", "LastPublishDate", "Title", "Description", "URL", "ConsumerContact",
    "SoldAtLabel", "Products", "Images", "Injuries", "Manufacturers", "Retailers", "Importers", "Distributors",
    "Inconjunctions", "ManufacturerCountries", "ProductUPCs", "Hazards", "Remedies", "RemedyOptions",
})

# Hazard types from the hazard text, when HazardType is empty: the words CPSC's own hazard
# categories use. Checked in order; a text may name several.
HAZARD_KEYWORDS = (
    ("Fire", r"\bfire\b|\bflames?\b|ignit"), ("Burn", r"\bburns?\b|scald"),
    ("Electric shock", r"electr(?:ic|ical)?\s*shock|electrocution"), ("Choking", r"chok"),
    ("Suffocation", r"suffocat|asphyxi"), ("Strangulation", r"strangulat"), ("Entrapment", r"entrap"),
    ("Fall", r"\bfalls?\b|\bfalling\b"), ("Tip-over", r"tip[- ]?over"), ("Laceration", r"lacerat|\bcuts?\b"),
    ("Drowning", r"drown"), ("Poisoning", r"poison|toxic"), ("Lead", r"\blead\b"),
    ("Crash", r"\bcrash"), ("Injury", r"injur"),
)
_HAZARD_RES = tuple((label, re.compile(pattern, re.IGNORECASE)) for label, pattern in HAZARD_KEYWORDS)


# ---- windows --------------------------------------------------------------------------
def grid(since: dt.date | None = None, until: dt.date | None = None) -> list[tuple[dt.date | None, dt.date | None]]:
    """The windows a walk asks, oldest first: (start, end), None meaning open (see the doc)."""
    windows: list[tuple[dt.date | None, dt.date | None]] = [(None, dt.date(FIRST_YEAR, 12, 31))]
    windows += [(dt.date(year, 1, 1), dt.date(year, 12, 31)) for year in range(FIRST_YEAR + 1, OPEN_FROM.year)]
    windows.append((OPEN_FROM, None))
    clipped = []
    for start, end in windows:
        if since is not None and end is not None and end < since:
            continue
        if until is not None and start is not None and start > until:
            continue
        if since is not None and (start is None or start < since):
            start = since
        if until is not None and (end is None or end > until):
            end = until
        clipped.append((start, end))
    return clipped


def window_query(start: dt.date | None, end: dt.date | None) -> dict[str, str]:
    params = {"format": "json"}
    if start is not None:
        params["RecallDateStart"] = start.isoformat()
    if end is not None:
        params["RecallDateEnd"] = end.isoformat()
    return params


def window_cap(start: dt.date | None, end: dt.date | None, today: dt.date) -> int:
    """The most records a window's answer may hold (see MAX_RECORDS_PER_YEAR)."""
    first = start or dt.date(FIRST_YEAR, 1, 1)
    days = max(1, ((end or max(today, first)) - first).days + 1)
    return max(MIN_WINDOW_RECORDS, math.ceil(days * MAX_RECORDS_PER_YEAR / 365))


def window_text(start, end) -> str:
    return f"{start.isoformat() if start else '…'}..{end.isoformat() if end else '…'}"


# ---- text -----------------------------------------------------------------------------
clean = text_rules.plain_text   # HTML in a field that should be plain text


def names(items, key: str = "Name") -> list[str]:
    """The non-empty `key` of each object of a published list (a list of strings too)."""
    if not isinstance(items, list):
        return []
    found = []
    for item in items:
        value = clean(item.get(key) if isinstance(item, dict) else item)
        if value and value not in found:
            found.append(value)
    return found


def hazard_types(hazards) -> tuple[list[str], bool]:
    """(hazard types, derived?): the published HazardType values, else keywords of the text."""
    published = names(hazards, "HazardType")
    if published:
        return published, False
    text = " ".join(names(hazards))
    return [label for label, regex in _HAZARD_RES if regex.search(text)], True


def objects(items, keys: tuple[str, ...]) -> list[dict]:
    """A published list of objects, each with only its non-empty `keys`, cleaned."""
    if not isinstance(items, list):
        return []
    kept = []
    for item in items:
        if isinstance(item, dict):
            cleaned = {key: clean(item.get(key)) for key in keys}
            cleaned = {key: value for key, value in cleaned.items() if value}
            if cleaned:
                kept.append(cleaned)
    return kept


def recall_id(value) -> str | None:
    """RecallID as text (an int in the API); None for 0, empty or not a number."""
    text = clean(value)
    if not text:
        return None
    text = text[:-2] if text.endswith(".0") else text
    return text if text.isdigit() and int(text) > 0 else None


class CpscCrawler(BaseCrawler):
    """CPSC (United States): the SaferProducts.gov Recall REST API, in date windows."""

    source = "cpsc"
    country = "US"
    source_lang = "en"
    record_type = "product_alert"
    endpoints = {"api": "https://www.saferproducts.gov"}

    def fetch(self, ctx) -> Iterator[dict]:
        override = ctx.setting("max_window_records")
        for start, end in grid(ctx.since, ctx.until):
            window = window_text(start, end)
            url = str(httpx.URL(ctx.url("api", RECALL_PATH), params=window_query(start, end)))
            cap = int(override) if override else window_cap(start, end, ctx.today())
            # A wrong answer is this window's dead letter; a host still unreachable after the retries
            # is the source's failure (the next run asks again), not one letter per window.
            with ctx.item({"window": window, "url": url}, url, passes=(Transient,)) as scope:
                download = ctx.http.download_to_file(url)
            if scope.failed:
                continue
            with download:
                problem = self._check(download.path, start, end, cap, window)
                if problem:
                    ctx.dead_letter({"window": window, "url": url, "problem": problem},
                                    UnexpectedContent(problem, url=url, response_sha256=download.sha256),
                                    stage="fetch", url=url, response_sha256=download.sha256)
                    continue
                count = 0
                with open(download.path, "rb") as handle:
                    for item in ijson.items(handle, "item", use_float=True):
                        count += 1
                        yield item
                log.info("cpsc: %s: %d recalls", window, count)

    @staticmethod
    def _check(path, start, end, cap: int, window: str) -> str | None:
        """Why this answer cannot be the window's, or None (a first pass over the file)."""
        with open(path, "rb") as handle:
            head = handle.read(512).lstrip(b"\xef\xbb\xbf \t\r\n")
            if not head.startswith(b"["):
                return MESSAGES["not_array"].format(window=window, head=head[:60])
            handle.seek(0)
            count, outside, example = 0, 0, None
            low = start - dt.timedelta(days=EDGE_DAYS) if start else None
            high = end + dt.timedelta(days=EDGE_DAYS) if end else None
            try:
                for item in ijson.items(handle, "item", use_float=True):
                    count += 1
                    if count > cap:
                        return MESSAGES["too_many"].format(count=count, window=window, cap=cap)
                    if not isinstance(item, dict):
                        return MESSAGES["not_object"].format(window=window, text=str(item)[:100])
                    if recall_id(item.get("RecallID")) is None and str(item.get("RecallID")).strip() in ("0", "0.0"):
                        return MESSAGES["zero_id"].format(window=window, text=str(item)[:200])
                    date = parse_date(str(item.get("RecallDate") or "")[:10])
                    if date is not None and ((low and date < low) or (high and date > high)):
                        outside += 1
                        example = example or (item.get("RecallID"), date.isoformat())
            except ijson.JSONError as exc:
                return MESSAGES["broken"].format(count=count, window=window, error=exc)
        if outside:
            return MESSAGES["outside"].format(count=outside, window=window, example=example[0], date=example[1])
        return None

    def parse(self, ctx, raw: dict) -> dict:
        if not isinstance(raw, dict):
            raise ValueError(f"a recall is not a JSON object: {str(raw)[:100]}")
        alert_id = recall_id(raw.get("RecallID"))
        if alert_id is None:
            raise ValueError(f"recall without a usable RecallID ({raw.get('RecallID')!r})")
        hazards = raw.get("Hazards")
        kinds, derived = hazard_types(hazards)
        products = objects(raw.get("Products"), ("Name", "Description", "Model", "Type", "CategoryID", "NumberOfUnits"))
        roles = {role: names(raw.get(role)) for role in ("Manufacturers", "Importers", "Distributors", "Retailers")}
        extra = {
            "last_publish_date": (parse_date(str(raw.get("LastPublishDate") or "")[:10]) or None),
            "products": products,
            "images": [{"url": i["URL"], **({"caption": i["Caption"]} if "Caption" in i else {})}
                       for i in objects(raw.get("Images"), ("URL", "Caption")) if "URL" in i],
            "injuries": names(raw.get("Injuries")),
            "manufacturers": roles["Manufacturers"], "importers": roles["Importers"],
            "distributors": roles["Distributors"], "retailers": roles["Retailers"],
            "upcs": names(raw.get("ProductUPCs"), "UPC"),
            "remedy_options": names(raw.get("RemedyOptions"), "Option"),
            "in_conjunction": objects(raw.get("Inconjunctions"), ("Name", "URL", "Country")),
            "consumer_contact": clean(raw.get("ConsumerContact")),
            "sold_at": clean(raw.get("SoldAtLabel")),
            "hazard_type_from_text": True if derived and kinds else None,
        }
        if extra["last_publish_date"] is not None:
            extra["last_publish_date"] = extra["last_publish_date"].isoformat()
        extra.update({key: value for key, value in raw.items() if key not in KNOWN_FIELDS and value not in (None, "", [])})
        return {
            "alert_id": alert_id,
            "recall_number": clean(raw.get("RecallNumber")),
            "alert_date": str(raw.get("RecallDate") or "")[:10] or None,
            "title_original": clean(raw.get("Title")),
            "description_original": clean(raw.get("Description")),
            "product_original": "; ".join(p["Name"] for p in products if p.get("Name")) or None,
            "hazard_original": "; ".join(names(hazards)) or None,
            "what_to_do_original": "; ".join(names(raw.get("Remedies"))) or None,
            "category": [p["Type"] for p in products if p.get("Type")],
            "hazard_type": kinds,
            "made_in": names(raw.get("ManufacturerCountries"), "Country"),
            "company": roles["Manufacturers"] + roles["Importers"] + roles["Distributors"],
            "authority": "CPSC",
            "source_url": clean(raw.get("URL")),
            "extra": {key: value for key, value in extra.items() if value not in (None, "", [])},
        }
