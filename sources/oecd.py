"""OECD Global Portal on Product Recalls: the GlobalRecalls RSS feed (recalls of about 40
jurisdictions), as `product_alert` records.

Where the data comes from: `https://globalrecalls.oecd.org/ws/rss.xqy`, RSS 2.0 listing the
recalls created in the portal during the last **7 days** and nothing older. A recall not read
within a week cannot be read later, so the source declares `window_days = 7` and `status` /
`doctor` say loudly when its last successful run is older than that, and show the gap between
two runs (basecrawler/operations/coverage.py).

Rules decided from the published data (see also fixtures/oecd/README.md):

- Identity. The guid is `http://PoliciesApplications.oecd.org/GlobalRecalls/Recall/<LANG>/
  <COUNTRY>/<origin id>`; the origin id is the publishing agency's own id and may hold slashes
  (`K26/EP/10022792`, `SR/03722/25`). The record key is (country, origin id): the language is
  not part of it, so Canada's English and French items are one record. Every item is yielded,
  each carrying all the language variants of its recall, so both parse to the same record and
  the second is counted `merged` in the run line (and an item listed twice likewise).
- English first: title, description and link come from the English variant when there is one;
  the other languages are kept in `extra` under their code (`extra["fr"]`).
- The jurisdiction is the record's country (the guid's country code); `dcterms:creator` (the
  jurisdiction's name) is kept as the authority.
- Date: `dcterms:dateSubmitted` (the recall's date; a US recall entered today may carry its
  original date of 2000). `pubDate` (when the portal published it, sometimes cut short: "Tue,
  18 Aug 2026 13:") is kept in `extra["published"]` when readable; an unreadable
  dateSubmitted falls back to it. Because the feed lists by publication, not by the recall's
  date, every item of the feed is kept whatever its date (`min_overlap_days`).
- Text: descriptions carry escaped HTML (`&lt;p&gt;`, `&lt;ul&gt;`): tags dropped, entities
  decoded, white space squashed (`clean_text`).
- Links to other publishers: `extra["origin_id"]` always; for Korea (`K26/EP/<uid>`) the KATS
  recall uid in `extra["kats_uid"]` (the `kr` source's id).
"""
from __future__ import annotations

import datetime as dt
import email.utils
import logging
import re
from typing import Iterator

from basecrawler import BaseCrawler, Republishes
from basecrawler.formats import text as text_rules
from basecrawler.formats.dates import parse_date
from basecrawler.formats.xmlsafe import read_list

log = logging.getLogger(__name__)

FEED_PATH = "/ws/rss.xqy"
GUID_RE = re.compile(r"/GlobalRecalls/Recall/([A-Za-z]{2})/([A-Za-z]{2,3})/(.+)$")
KATS_UID_RE = re.compile(r"^K\d+/[A-Z]+/(\d+)$")
FIELDS = ("title", "link", "description", "creator", "dateSubmitted", "pubDate", "guid")
PREFERRED_LANG = "en"


def read_feed(body: bytes, header: str | None = None):
    """(the feed's <item> elements, how it was read) for `read_list_document`."""
    listed = read_list(body, "item", header=header)
    return listed.items, listed


def _child_text(element, name: str) -> str | None:
    for child in element:
        if isinstance(child.tag, str) and child.tag.rsplit("}", 1)[-1] == name:
            return "".join(child.itertext())
    return None


def item_fields(element) -> dict:
    return {name: _child_text(element, name) for name in FIELDS}


def split_guid(guid: str | None) -> tuple[str, str, str] | None:
    """'…/Recall/EN/KR/K26/EP/10022792' → ('en', 'KR', 'K26/EP/10022792'); anything else None."""
    m = GUID_RE.search((guid or "").strip())
    if not m or not m.group(3).strip("/ "):
        return None
    return m.group(1).lower(), m.group(2).upper(), m.group(3).strip().strip("/")


def rfc822_moment(value: str | None) -> dt.datetime | None:
    """'Wed, 19 Aug 2026 18:14:56 GMT' → an aware UTC datetime; a cut-short or unreadable value None."""
    if not value or not value.strip():
        return None
    try:
        moment = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.astimezone(dt.timezone.utc)


def clean(value: str | None) -> str | None:
    return text_rules.clean_text(value, markup=True, squash_space=True)


class OecdGlobalRecallsCrawler(BaseCrawler):
    """OECD GlobalRecalls: the 7-day RSS feed, one record per (country, origin id)."""

    source = "oecd"
    source_lang = "en"
    record_type = "product_alert"
    many_countries = True   # each record's country is its jurisdiction's (about 40)
    endpoints = {"feed": "https://globalrecalls.oecd.org"}
    # The feed holds the last 7 days only: coverage.py reports runs further apart than this.
    window_days = 7
    # The portal republishes these publishers' recalls, which we also read at the source:
    # each such record is shown inside the original's group (basecrawler/pipeline/linking.py).
    republishes = (
        Republishes("hc", country="CA", field="alert_id"),     # EN/CA/82438 is hc's NID 82438
        Republishes("kr", country="KR", field="alert_id"),     # EN/KR/K26/EP/10022792 is KATS uid 10022792
        Republishes("cpsc", country="US", field="recall_number"),   # EN/US/26713 is CPSC RecallNumber 26713
    )
    # Items are listed by publication, dated by the recall (a US recall of 2000 entered today):
    # keep every item of the feed on incremental runs (see the module docstring).
    min_overlap_days = 200 * 366

    def fetch(self, ctx) -> Iterator[dict]:
        url = ctx.url("feed", FEED_PATH)
        elements = ctx.read_list_document(url, read_feed, name="GlobalRecalls feed", label="feed", key="feed_url")
        items = [item_fields(element) for element in elements]
        variants: dict[tuple[str, str], dict[str, dict]] = {}
        for item in items:
            parts = split_guid(item["guid"])
            if parts:
                lang, country, origin = parts
                # The first item of a language wins; a repeat of it is the same recall again.
                variants.setdefault((country, origin), {}).setdefault(lang, item)
        published = [m for m in (rfc822_moment(item["pubDate"]) for item in items) if m]
        if published:
            log.info("oecd: %d items, %d recalls, published %s to %s", len(items), len(variants),
                     min(published).date(), max(published).date())
        for item in items:
            parts = split_guid(item["guid"])
            yield {"item": item, "variants": variants[parts[1:]] if parts else None}

    def parse(self, ctx, raw: dict) -> dict:
        item = raw.get("item") if isinstance(raw, dict) else None
        if not isinstance(item, dict):
            raise ValueError(f"not a feed item: {str(raw)[:100]}")
        parts = split_guid(item.get("guid"))
        if parts is None:
            raise ValueError(f"feed item without a readable guid (…/Recall/<LANG>/<COUNTRY>/<id>): {item.get('guid')!r}")
        _, country, origin = parts
        variants = raw.get("variants") or {parts[0]: item}
        lang = PREFERRED_LANG if PREFERRED_LANG in variants else sorted(variants)[0]
        main = variants[lang]
        submitted = parse_date((main.get("dateSubmitted") or "").strip(), day_first=False)
        moment = rfc822_moment(main.get("pubDate"))
        extra: dict = {"origin_id": origin, "guid": (main.get("guid") or "").strip(),
                       "languages": sorted(variants)}
        if moment:
            extra["published"] = moment.isoformat()
        elif clean(main.get("pubDate")):
            extra["published_text"] = clean(main.get("pubDate"))   # cut short in the feed: kept as published
        if country == "KR" and (m := KATS_UID_RE.match(origin)):
            extra["kats_uid"] = m.group(1)
        for other, variant in sorted(variants.items()):
            if other != lang:
                extra[other] = {key: value for key, value in (
                    ("title", clean(variant.get("title"))), ("description", clean(variant.get("description"))),
                    ("source_url", clean(variant.get("link")))) if value}
        return {
            "country": country,
            "alert_id": origin,
            "alert_date": submitted or (moment.date() if moment else None),
            "title_original": clean(main.get("title")),
            "description_original": clean(main.get("description")),
            "authority": clean(main.get("creator")),
            # The original publisher's number, which `republishes` below matches (a Canadian
            # alert's NID, a KATS uid, a CPSC recall number).
            "recall_number": extra.get("kats_uid") or origin,
            "source_lang": lang,
            "source_url": clean(main.get("link")),
            "extra": extra,
        }
