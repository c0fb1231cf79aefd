"""vehicle_recall: a recall of motor vehicles or their equipment (NHTSA, Transport Canada,
MLIT, Australia, the motor-vehicle notifications of EU Safety Gate).

The declaration (VEHICLE_RECALL) and its model (`Recall`, pydantic v2). Text fields come in
pairs: `X_original` (the source's own words, in `source_lang`) and `X_ko` (Korean, written only
by the translation worker). Normalisation every vehicle source needs lives here, once: blank
strings are None, model-year sentinels are None, unit counts like "2,700.00" or "9,972台"
become integers, an unreadable date becomes the 1970-01-01 sentinel with `date_unknown=True`
so the record is kept (the field helpers of basecrawler.recordtypes.fields).
"""
from __future__ import annotations

import datetime as dt
import functools
import logging
import math
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from basecrawler.recordtypes import Facet, RecordType
from basecrawler.recordtypes.fields import (MAX_TEXT_CHARS, blank_to_none, clean_strings, date_or_unknown,
                                            normalize_digits, parse_date)

from .vehicle_makers import manufacturer_key

log = logging.getLogger("basecrawler.model")

# Stores made before record types hold this date for an unknown one (kept for them).
SENTINEL_DATE = dt.date(1970, 1, 1)
TEXT_FIELDS = ("manufacturer", "model", "component", "summary", "defect_cause", "consequence", "remedy")
ORIGINAL_COLUMNS = tuple(f"{name}_original" for name in TEXT_FIELDS)
KOREAN_COLUMNS = tuple(f"{name}_ko" for name in TEXT_FIELDS)

MODEL_YEAR_SENTINELS = {"9999", "0", "0000", ""}
# The largest vehicle count a recall can plausibly have. The biggest recalls on record (the
# Takata inflators) name tens of millions of vehicles; a billion is more than any market's
# whole fleet, so a larger number is a misprint or a unit mix-up, never a count. It is also far
# below SQLite's INTEGER limit (2^63-1), which 10^23 overflowed and cost the whole record.
MAX_AFFECTED_UNITS = 1_000_000_000
_UNITS_RE = re.compile(r"^\s*(\d[\d,]*)(?:\.(\d+))?\s*(?:台|units?|vehicles?)?\s*$", re.IGNORECASE)
_YEAR_RANGE_RE = re.compile(r"^(\d{4})\s*[-–~〜]\s*(\d{4})$")


def parse_units(value: Any) -> int | None:
    """'2,700.00' → 2700, '9,972台' → 9972, '96310' → 96310; anything else → None (negative,
    fractional, non-finite or above MAX_AFFECTED_UNITS included)."""
    units = _units_or_none(value)
    return units if units is not None and units <= MAX_AFFECTED_UNITS else None


def _units_or_none(value: Any) -> int | None:
    if value.__class__ is str and value.isdigit() and value.isascii():
        return int(value)   # the common case ("96310"), without NFKC and the pattern
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return int(value) if value >= 0 and value == int(value) else None
    m = _UNITS_RE.match(normalize_digits(str(value)))
    if not m:
        return None
    if m.group(2) and int(m.group(2)) != 0:
        return None  # a fractional vehicle count is not a count
    return int(m.group(1).replace(",", ""))


_NUMBER_LIKE_RE = re.compile(r"^\s*[-+−]?\s*(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?\s*(?:台|units?|vehicles?)?\s*$",
                             re.IGNORECASE)


def is_number_like(value: Any) -> bool:
    """A number, or text written as one ("-5", "1e400", "100000000000000000000000", "inf")."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    text = normalize_digits(str(value)).strip().lower()
    return bool(_NUMBER_LIKE_RE.match(text)) or text.lstrip("+-") in ("inf", "infinity", "nan")


def normalize_model_year(value: Any) -> str | None:
    """'2021', '2019-2021'; NHTSA's 9999 and 0 mean "unknown / equipment" and become None."""
    if value is None:
        return None
    if value.__class__ is str:   # a few distinct values per source, asked for every record
        return _model_year_of_text(value)
    return _model_year_of_text(str(value))


@functools.lru_cache(maxsize=4096)
def _model_year_of_text(value: str) -> str | None:
    s = normalize_digits(value).strip()
    if s in MODEL_YEAR_SENTINELS:
        return None
    m = _YEAR_RANGE_RE.match(s)
    if m:
        low, high = sorted((m.group(1), m.group(2)))
        return low if low == high else f"{low}-{high}"
    return s


def year_range(years) -> str | None:
    """Many model years → '2019-2021' (or '2021'); sentinels ignored."""
    clean = sorted({y for y in (normalize_model_year(v) for v in years) if y and y.isdigit()})
    if not clean:
        return None
    return clean[0] if clean[0] == clean[-1] else f"{clean[0]}-{clean[-1]}"


class Recall(BaseModel):
    # No str_strip_whitespace: `_normalise` (clean_strings) has stripped every text already,
    # and pydantic stripping each again cost a second pass over every field of every record.
    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    country: str = Field(min_length=2, max_length=3)
    recall_number: str = Field(min_length=1)
    recall_date: dt.date
    date_unknown: bool = False

    manufacturer_original: str | None = Field(default=None, max_length=MAX_TEXT_CHARS)
    manufacturer_ko: str | None = None
    model_original: str | None = Field(default=None, max_length=MAX_TEXT_CHARS)
    model_ko: str | None = None
    component_original: str | None = Field(default=None, max_length=MAX_TEXT_CHARS)
    component_ko: str | None = None
    summary_original: str | None = Field(default=None, max_length=MAX_TEXT_CHARS)
    summary_ko: str | None = None
    defect_cause_original: str | None = Field(default=None, max_length=MAX_TEXT_CHARS)
    defect_cause_ko: str | None = None
    consequence_original: str | None = Field(default=None, max_length=MAX_TEXT_CHARS)
    consequence_ko: str | None = None
    remedy_original: str | None = Field(default=None, max_length=MAX_TEXT_CHARS)
    remedy_ko: str | None = None

    model_year: str | None = None
    affected_units: int | None = None
    source_lang: str = "en"
    source_url: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        # Every normalisation of this model in one before-validator: each Python validator
        # pydantic calls costs a round trip from its core (per field, per record), and these
        # used to be four (#23: validation was a third of the write path).
        if not isinstance(data, dict):
            return data
        data = date_or_unknown(clean_strings(data), "recall_date", SENTINEL_DATE)
        if data.get("extra") is None:
            data["extra"] = {}
        country = data.get("country")
        if country.__class__ is str:
            data["country"] = country.upper()
        if data.get("model_year") is not None:
            data["model_year"] = normalize_model_year(data["model_year"])
        raw_units = data.get("affected_units")
        # A plain count of at most nine ASCII digits (below MAX_AFFECTED_UNITS) is the model's
        # own int parsing, which reads it as `parse_units` would.
        if raw_units is not None and not (raw_units.__class__ is str and len(raw_units) < 10 and raw_units.isdigit()
                                          and raw_units.isascii()):
            units = parse_units(raw_units)
            if units is not None:
                data["affected_units"] = units
            elif is_number_like(raw_units):
                # A number that does not fit a count (negative, fractional, 1e400, 10^23) must not
                # cost the recall (10^23 overflowed SQLite's INTEGER and lost it): stored as
                # unknown, the published value kept for a reader.
                data["extra"] = {**data["extra"], "unparsed_affected_units": str(raw_units)[:200]}
                log.warning("%s %s: affected_units %.60r is not a plausible count; stored as unknown, raw value kept "
                            "in extra", data.get("country") or "", data.get("recall_number") or "", str(raw_units))
                data["affected_units"] = None
            else:
                # Text that is no number at all ("many"): left as text, so the integer field
                # refuses it and the item is a validation dead letter naming affected_units.
                data["affected_units"] = str(raw_units)
        if data.get("source_lang") is None:
            data.pop("source_lang", None)
        return data

    def to_row(self) -> dict[str, Any]:
        """The record as store columns (dates as ISO text; extra stays a dict)."""
        # The fields are plain values (extra a dict the store only reads), so a shallow copy of
        # the instance dict does what model_dump does at a fraction of the cost on the hot path.
        row = dict(self.__dict__)
        row["recall_date"] = self.recall_date.isoformat()
        return row


def _model_years(value) -> list[str]:
    """'2019-2021' counts under 2019, 2020 and 2021; a single year under itself."""
    if not value:
        return []
    low, _, high = str(value).partition("-")
    if high and low.isdigit() and high.isdigit() and int(high) - int(low) < 100:
        return [str(year) for year in range(int(low), int(high) + 1)]
    return [str(value)]


VEHICLE_RECALL = RecordType(
    name="vehicle_recall",
    title="Vehicle recalls",
    model=Recall,
    table="recalls",
    key=("country", "recall_number"),
    date_field="recall_date",
    date_optional=True,
    date_sentinel=SENTINEL_DATE,
    translated=TEXT_FIELDS,
    facets=(
        Facet("country", "Country"),
        Facet("source", "Source"),
        # `--manufacturer Ford Motor Company` and `--filter manufacturer_key=ford` both find FORD;
        # --manufacturer also matches a substring of the published or Korean name.
        Facet("manufacturer_key", "Manufacturer", normalise=manufacturer_key, option="manufacturer",
              also_text="manufacturer"),
        # `--year 2020` and `--filter model_year=2020` also find a range "2019-2021".
        Facet("model_year", "Model year", expand=_model_years, normalise=normalize_model_year, option="year",
              ranged=True),
    ),
    labels={
        "source": "Source", "country": "Country", "recall_number": "Recall number",
        "recall_date": "Recall date", "date_unknown": "Date unknown",
        "manufacturer_original": "Manufacturer", "manufacturer_ko": "Manufacturer (Korean)",
        "manufacturer_key": "Manufacturer key",
        "model_original": "Model", "model_ko": "Model (Korean)",
        "component_original": "Component", "component_ko": "Component (Korean)",
        "summary_original": "Summary", "summary_ko": "Summary (Korean)",
        "defect_cause_original": "Defect / cause", "defect_cause_ko": "Defect / cause (Korean)",
        "consequence_original": "Consequence", "consequence_ko": "Consequence (Korean)",
        "remedy_original": "Remedy", "remedy_ko": "Remedy (Korean)",
        "model_year": "Model year", "affected_units": "Affected units", "source_lang": "Language",
        "source_url": "Source link", "extra": "Extra",
    },
    display=("summary", "defect_cause", "component"),
    listing=("recall_date", "country", "source", "recall_number", "manufacturer_original", "model_original",
             "model_year"),
    card=("recall_number", "recall_date", "country", "source", "manufacturer", "model", "model_year",
          "affected_units", "component", "summary", "defect_cause", "consequence", "remedy", "source_url"),
    heading=("manufacturer", "model", "model_year"),
    derived=lambda row: {"manufacturer_key": manufacturer_key(row.get("manufacturer_original"))},
    derived_columns={"manufacturer_key": str},
    same_as_field="recall_number",
    needs_detail=lambda record: record.model_original is None,   # the list had no model: ask the detail
)
