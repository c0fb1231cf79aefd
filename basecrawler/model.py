"""The one record shape every source produces: `Recall` (pydantic v2).

Text fields come in pairs: `X_original` (the source's own words, in `source_lang`) and `X_ko`
(Korean, written only by the translation worker). Normalisation that every source needs lives
here, once: blank strings are None, model-year sentinels are None, unit counts like "2,700.00"
or "9,972台" become integers, an unreadable date becomes the 1970-01-01 sentinel with
`date_unknown=True` so the record is kept.
"""
from __future__ import annotations

import datetime as dt
import logging
import math
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .dates import SENTINEL_DATE, normalize_digits, parse_date

TEXT_FIELDS = (
    "manufacturer",
    "model",
    "component",
    "summary",
    "defect_cause",
    "consequence",
    "remedy",
)
ORIGINAL_COLUMNS = tuple(f"{name}_original" for name in TEXT_FIELDS)
KOREAN_COLUMNS = tuple(f"{name}_ko" for name in TEXT_FIELDS)

log = logging.getLogger(__name__)

MODEL_YEAR_SENTINELS = {"9999", "0", "0000", ""}
# The largest vehicle count a recall can plausibly have. The biggest recalls on record (the
# Takata inflators) name tens of millions of vehicles; a billion is more than any market's
# whole fleet, so a larger number is a misprint or a unit mix-up, never a count. It is also far
# below SQLite's INTEGER limit (2^63-1), which 10^23 overflowed and cost the whole record.
MAX_AFFECTED_UNITS = 1_000_000_000
_UNITS_RE = re.compile(r"^\s*(\d[\d,]*)(?:\.(\d+))?\s*(?:台|units?|vehicles?)?\s*$", re.IGNORECASE)
_YEAR_RANGE_RE = re.compile(r"^(\d{4})\s*[-–~〜]\s*(\d{4})$")


# C0/C1 control characters other than tab and newline: never meaningful in recall text, and
# they break terminals, CSV consumers and translation backends.
_CONTROL_CHARS_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# A text field longer than this is a broken page or a runaway field, not a recall description.
MAX_TEXT_CHARS = 100_000


def blank_to_none(value: Any) -> Any:
    if isinstance(value, str):
        if not value.isprintable():
            value = _CONTROL_CHARS_RE.sub("", value.replace("\r\n", "\n").replace("\r", "\n"))
        value = value.strip()
        return value or None
    return value


def parse_units(value: Any) -> int | None:
    """'2,700.00' → 2700, '9,972台' → 9972, '96310' → 96310; anything else → None (negative,
    fractional, non-finite or above MAX_AFFECTED_UNITS included)."""
    units = _units_or_none(value)
    return units if units is not None and units <= MAX_AFFECTED_UNITS else None


def _units_or_none(value: Any) -> int | None:
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
    s = normalize_digits(str(value)).strip()
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
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, validate_assignment=False)

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
        if not isinstance(data, dict):
            return data
        data = {key: blank_to_none(value) if value.__class__ is str else value for key, value in data.items()}
        raw_date = data.get("recall_date")
        parsed = parse_date(raw_date)
        if parsed is None:
            data["recall_date"] = SENTINEL_DATE
            data["date_unknown"] = True
            if raw_date is not None:
                extra = dict(data.get("extra") or {})
                extra.setdefault("unparsed_recall_date", str(raw_date))
                data["extra"] = extra
        else:
            data["recall_date"] = parsed
        if data.get("extra") is None:
            data["extra"] = {}
        raw_units = data.get("affected_units")
        if raw_units is not None:
            units = parse_units(raw_units)
            if units is None and is_number_like(raw_units):
                # A number that does not fit a count (negative, fractional, 1e400, 10^23) must not
                # cost the recall (10^23 overflowed SQLite's INTEGER and lost it): stored as
                # unknown, the published value kept for a reader.
                data["extra"] = {**data["extra"], "unparsed_affected_units": str(raw_units)[:200]}
                log.warning("%s %s: affected_units %.60r is not a plausible count; stored as unknown, raw value kept "
                            "in extra", data.get("country") or "", data.get("recall_number") or "", str(raw_units))
                data["affected_units"] = None
        if data.get("source_lang") is None:
            data.pop("source_lang", None)
        return data

    @field_validator("country")
    @classmethod
    def _upper_country(cls, value: str) -> str:
        return value.upper()

    @field_validator("model_year", mode="before")
    @classmethod
    def _model_year(cls, value: Any) -> str | None:
        return normalize_model_year(value)

    @field_validator("affected_units", mode="before")
    @classmethod
    def _units(cls, value: Any) -> int | None:
        # A number that does not fit was already set aside by the normaliser; what is left
        # unreadable here is text that is no number at all ("many"): a validation failure.
        if value is None:
            return None
        units = parse_units(value)
        if units is None:
            raise ValueError(f"affected_units is not a count: {value!r}")
        return units

    def to_row(self) -> dict[str, Any]:
        """The record as store columns (dates as ISO text; extra stays a dict)."""
        # The fields are plain values (extra a dict the store only reads), so a shallow copy of
        # the instance dict does what model_dump does at a fraction of the cost on the hot path.
        row = dict(self.__dict__)
        row["recall_date"] = self.recall_date.isoformat()
        return row
