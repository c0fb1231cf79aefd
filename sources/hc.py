"""Government of Canada Recalls & Safety Alerts (Health Canada, CFIA, Transport Canada): every
alert of the open-data file, as `product_alert` records.

Where the data comes from: one JSON file, `HCRSAMOpenData.json` on recalls-rappels.canada.ca, a
complete snapshot (~34,000 records, ~16 MB) refreshed daily, so incremental and full runs read
the same download. It is streamed to a temp file by the HTTP client and read item by item with
ijson's flat events under structural limits (basecrawler/formats/jsonlimits.py: nesting depth,
entries per container, string length), with flat memory: bench/bench_hc.py.

Rules decided from the published data (see also fixtures/hc/README.md):

- Every record is stored, none filtered: a record whose `Last updated` is old but which is new
  to the store (an archived alert published late) must not fall out of the incremental window,
  so the window reaches back over the whole file (`min_overlap_days`); unchanged records cost
  no write (the store's upsert compares before writing).
- Text: HTML entities (`&nbsp;`, `&amp;`) decoded, tags dropped, zero-width spaces and BOMs
  removed, runs of white space one space. `What you should do` comes from HTML paragraphs
  joined without a space ("…purchased.Health Canada…"): a space is put back after a sentence
  end followed by a capital.
- Category: one or several joined with " - ". A comma never separates (a single category such
  as "Nuts, grains, and seeds" holds commas); and " - " inside a single category occurs only
  in a vehicle class written with abbreviations ("Truck - Med. & H.D."): a piece made only of
  abbreviations ("Med. & H.D.") qualifies the piece before it and is joined back onto it, and
  the known compound categories are protected before splitting.
- Recall class as published ("Class 1".."Class 3", "Type I".."Type III", ranges such as
  "Type I - Type II" kept whole); "--" and empty mean none.
- Date: `Last updated` (ISO). Empty or null (~8 % of records) → date unknown, never invented.
- Archived: "1"/"0" → the `archived` field.
- Transport Canada alerts are the `ca` source's vehicle recalls under another id: the recall
  number found in the Title or the Issue goes into `recall_number`, which links the two.
"""
from __future__ import annotations

import logging
import re
from typing import Iterator

import ijson

from basecrawler import BaseCrawler, UnexpectedContent
from basecrawler.formats import jsonlimits, text as text_rules
from basecrawler.formats.dates import parse_date
from basecrawler.recordtypes.fields import refuse_wrong_types

log = logging.getLogger(__name__)

FILE_PATH = "/sites/default/files/opendata-donneesouvertes/HCRSAMOpenData.json"

# Fields of a record as published, and what becomes of them; anything else is kept in extra.
KNOWN_FIELDS = ("NID", "Title", "URL", "Organization", "Product", "Issue", "What you should do", "Category",
                "Recall class", "Last updated", "Archived")
_KNOWN_SET = frozenset(KNOWN_FIELDS)
_STRUCTURES = frozenset((list, dict))
# The stored field each published one becomes (what a refusal names).
PUBLISHED_AS = {"NID": "alert_id", "Title": "title_original", "URL": "source_url", "Organization": "authority",
                "Product": "product_original", "Issue": "hazard_original", "What you should do": "what_to_do_original",
                "Category": "category", "Recall class": "risk_class", "Last updated": "alert_date",
                "Archived": "archived"}

# Zero-width space / non-joiner / joiner, word joiner, BOM: invisible, pasted from the CMS.
_INVISIBLE_RE = re.compile("[\u200b\u200c\u200d\u2060\ufeff]")
_NEEDS_CLEANING_RE = re.compile(r"[&<\t\n\r\f\v]|  ")
# A sentence end glued to the next sentence by the HTML-to-text export ("purchased.Health"):
# the stop that is followed by a capital and preceded by a letter, digit or ")". Matching the
# stop itself (lookbehind after it) tries the lookarounds only at a stop, not at every position
# of the text: ~3× faster than a zero-width match on half the records' longest text.
_GLUED_SENTENCE_RE = re.compile(r"[.!?](?<=[a-z0-9)][.!?])(?=[A-Z][a-z])")

CATEGORY_SEPARATOR = " - "
# Single categories that contain the separator themselves (from the published vehicle classes).
KNOWN_COMPOUND_CATEGORIES = ("Truck - Med. & H.D.",)
_ABBREVIATIONS_ONLY_RE = re.compile(r"^(?:[A-Z][A-Za-z]{0,3}\.(?:[A-Z]\.)*|&)(?:\s+(?:[A-Z][A-Za-z]{0,3}\.(?:[A-Z]\.)*|&))*$")
NO_RECALL_CLASS = {"--", "-", "n/a"}

_TC_RECALL_RE = re.compile(r"Transport\s+Canada\s+recall\s*(?:number|no\.?|#)?\s*[-–:]?\s*(\d{6,8})\b", re.IGNORECASE)
_TC_NUMBER_RE = re.compile(r"\b((?:19|20)\d{5})\b")   # TC recall numbers: year + 3 digits, e.g. 2024301


def clean(value) -> str | None:
    """Published text → stored text: entities decoded, tags and invisible characters dropped."""
    if value is None:
        return None
    text = value if type(value) is str else str(value)
    if text.isascii() and ((text.isprintable() and "  " not in text and "&" not in text and "<" not in text)
                           or not _NEEDS_CLEANING_RE.search(text)):
        # Most values: nothing to decode or squash (34,000 records a run). The string checks
        # answer the printable case without the regex, which still decides the rest.
        return text.strip() or None
    # `&nbsp;` is the file's usual entity; as a plain space the text often stays ASCII, which
    # spares it the mojibake check (the costliest step, for text that cannot be mojibake).
    # The invisible characters are not ASCII: ASCII text has none to remove.
    if not text.isascii():
        text = _INVISIBLE_RE.sub("", text)
    text = text.replace("&nbsp;", " ")
    return text_rules.clean_text(text, markup=True, squash_space=True)


def clean_title(value) -> str | None:
    """A title with the maker left blank ends in its separator ("Transport Canada Recall - 2018339 - ")."""
    text = clean(value)
    if not text:
        return None
    return re.sub(r"\s+[-–]$", "", text) if text.endswith(("-", "–")) else text


def _spaced(match: re.Match) -> str:
    return match.group() + " "


def clean_paragraphs(value) -> str | None:
    text = clean(value)
    return _GLUED_SENTENCE_RE.sub(_spaced, text) if text else None


def split_categories(value) -> list[str]:
    """'Candy, confectionary, snacks and sweeteners - Nuts, grains, and seeds' → two categories;
    'Truck - Med. & H.D.' → one; 'SUV - Car' → two (see the module docstring)."""
    text = clean(value)
    if not text:
        return []
    if CATEGORY_SEPARATOR not in text:
        return [text]                     # most records: one category
    protected = text
    for index, known in enumerate(KNOWN_COMPOUND_CATEGORIES):
        protected = protected.replace(known, f"\x00{index}\x00")
    categories: list[str] = []
    for piece in protected.split(CATEGORY_SEPARATOR):
        piece = re.sub(r"\x00(\d+)\x00", lambda m: KNOWN_COMPOUND_CATEGORIES[int(m.group(1))], piece).strip()
        if not piece:
            continue
        if categories and _ABBREVIATIONS_ONLY_RE.match(piece):
            categories[-1] += CATEGORY_SEPARATOR + piece
        else:
            categories.append(piece)
    return list(dict.fromkeys(categories))


def recall_class(value) -> str | None:
    text = clean(value)
    return None if not text or text.lower() in NO_RECALL_CLASS else text


def tc_recall_number(title: str | None, issue: str | None, organization: str | None) -> str | None:
    """The Transport Canada recall number a record carries, if any ("Transport Canada Recall -
    2017213 - EMERGENCY ONE")."""
    texts = [t for t in (title, issue) if t]
    for text in texts:
        if _may_name_transport_canada(text) and (m := _TC_RECALL_RE.search(text)):
            return m.group(1)
    if (organization or "").upper() == "TC":
        for text in texts:
            if m := _TC_NUMBER_RE.search(text):
                return m.group(1)
    return None


def _may_name_transport_canada(text: str) -> bool:
    """False when `text` cannot match _TC_RECALL_RE (most alerts: one `in` instead of a
    case-insensitive search). Only ASCII text is judged by lower(): the regex's IGNORECASE also
    takes "ſ" for "s" and the Kelvin sign for "k"."""
    return not text.isascii() or "transport" in text.lower()


def archived(value) -> bool | None:
    text = clean(value)
    return {"1": True, "0": False, "true": True, "false": False}.get((text or "").lower())


# ---- fields whose values repeat -----------------------------------------------------------
# Organization, Issue, Category, Recall class and Archived take a few hundred distinct values
# over 34,000 alerts: each distinct published text is cleaned once and looked up after (a dict
# lookup instead of the cleaning's checks). Bounded: emptied whole at MEMO_MAX entries.
MEMO_MAX = 1 << 14


class _Memo(dict):
    """published value → what `make` makes of it, made once per distinct text."""

    __slots__ = ("make",)

    def __init__(self, make):
        super().__init__()
        self.make = make

    def __missing__(self, value):
        if len(self) >= MEMO_MAX:
            self.clear()
        made = self[value] = self.make(value)
        return made

    def of(self, value):
        # Text and null only: 1, 1.0 and True are one key to a dict but clean to "1", "1.0", "True".
        return self[value] if value is None or value.__class__ is str else self.make(value)


def _class_of(value) -> tuple[str | None, str | None]:
    raw_class = clean(value)
    return raw_class, recall_class(raw_class)


_ORGANIZATIONS, _ISSUES, _ARCHIVED = _Memo(clean), _Memo(clean), _Memo(archived)
_CATEGORIES = _Memo(lambda value: tuple(split_categories(value)))   # a tuple: each record gets its own list
_CLASSES = _Memo(_class_of)


class HealthCanadaAlertsCrawler(BaseCrawler):
    """Government of Canada Recalls & Safety Alerts: the open-data JSON file, every alert."""

    source = "hc"
    country = "CA"
    source_lang = "en"
    record_type = "product_alert"
    endpoints = {"data": "https://recalls-rappels.canada.ca"}
    # The file is a complete snapshot: look back over all of it on incremental runs too (see
    # the module docstring); 200 years reaches before the oldest alert (1991).
    min_overlap_days = 200 * 366

    def fetch(self, ctx) -> Iterator[dict]:
        url = ctx.url("data", FILE_PATH)
        with ctx.http.download_to_file(url) as download:
            with open(download.path, "rb") as handle:
                head = jsonlimits.head_of(handle)   # a BOM (UTF-8, UTF-16) honoured
                if not head.startswith(b"["):
                    raise UnexpectedContent(f"the alerts file is not a JSON array (starts {head[:40]!r})", url=url,
                                            body=head, response_sha256=download.sha256)
                count = 0
                try:
                    # Under the structural limits: an alert nested too deep, too wide or with
                    # a text too long is that alert's dead letter (a `Refused`), the rest read.
                    for item in jsonlimits.iter_items(handle):
                        count += 1
                        yield item
                except (ijson.JSONError, jsonlimits.NotAList, UnicodeDecodeError) as exc:
                    # The records read so far are kept; the whole body is in the archive by sha256.
                    raise UnexpectedContent(f"the alerts file breaks after {count} records: {exc}", url=url,
                                            response_sha256=download.sha256) from None
        log.info("hc: %d alerts in the file", count)

    @staticmethod
    def _types_as_declared(raw: dict) -> None:
        """Published fields are text (a number becomes its text); a list or an object in one
        is refused as the model would (a validation dead letter), never cleaned into its repr.
        The declared exception: `Category` as a list of texts is several categories."""
        wrong = {PUBLISHED_AS.get(name, name): value for name, value in raw.items()
                 if name in _KNOWN_SET and value.__class__ in _STRUCTURES
                 and not (name == "Category" and value.__class__ is list
                          and all(v is None or v.__class__ is str for v in value))}
        if wrong:
            refuse_wrong_types("product_alert", wrong)

    def parse(self, ctx, raw: dict) -> dict:
        if not isinstance(raw, dict):
            raise ValueError(f"an alert is not a JSON object: {str(raw)[:100]}")
        if any(value.__class__ in _STRUCTURES for value in raw.values()):
            self._types_as_declared(raw)
        nid = clean(raw.get("NID"))
        if not nid:
            raise ValueError("alert without an NID")
        title = clean_title(raw.get("Title"))
        issue, organization = _ISSUES.of(raw.get("Issue")), _ORGANIZATIONS.of(raw.get("Organization"))
        updated = clean(raw.get("Last updated"))
        parsed_date = parse_date(updated) if updated else None
        # Fields beyond the published eleven (none in today's file) go to extra, in file order.
        extra = ({key: value for key, value in raw.items() if key not in KNOWN_FIELDS and value not in (None, "")}
                 if raw.keys() - _KNOWN_SET else {})
        raw_class, risk_class = _CLASSES.of(raw.get("Recall class"))
        categories = raw.get("Category")
        categories = (list(_CATEGORIES.of(categories)) if categories.__class__ is not list
                      else list(dict.fromkeys(c for value in categories for c in _CATEGORIES.of(value))))
        if raw_class and risk_class is None:
            extra["recall_class_published"] = raw_class
        is_archived = _ARCHIVED.of(raw.get("Archived"))
        if is_archived is None and raw.get("Archived") not in (None, ""):
            extra["archived_published"] = str(raw.get("Archived"))
        return {
            "alert_id": nid,
            "alert_date": parsed_date or updated,   # unreadable text: the model keeps it, date unknown
            "title_original": title,
            "product_original": clean(raw.get("Product")),
            "hazard_original": issue,
            "what_to_do_original": clean_paragraphs(raw.get("What you should do")),
            "category": categories,
            "authority": organization,
            "risk_class": risk_class,
            "recall_number": tc_recall_number(title, issue, organization),
            "archived": is_archived,
            "source_url": clean(raw.get("URL")),
            "extra": extra,
        }
