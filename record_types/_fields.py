"""Field rules shared by the record types in this folder (not a type: the leading underscore
keeps discovery away). Every model here starts from `TypeModel`: blank text is None, control
characters go, runaway text is refused, and a date that is missing or unreadable makes the
record date-unknown instead of costing it (the raw value kept in `extra`)."""
from __future__ import annotations

import datetime as dt
import re
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator

# A text field longer than this is a broken page or a runaway field, not a record's text.
MAX_TEXT_CHARS = 100_000
# C0/C1 control characters other than tab and newline break terminals, CSV readers and
# translation backends; they never carry meaning in published text.
_CONTROL_CHARS_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_ISO_DATE_RE = re.compile(r"^\s*(\d{4})-(\d{2})-(\d{2})(?:[T ][0-9:.+\-Z]*)?\s*$")


def blank_to_none(value: Any) -> Any:
    if isinstance(value, str):
        if not value.isprintable():
            value = _CONTROL_CHARS_RE.sub("", value.replace("\r\n", "\n").replace("\r", "\n"))
        value = value.strip()
        return value or None
    return value


def iso_date(value: Any) -> dt.date | None:
    """A date, a datetime or ISO text ("2024-06-26", "2024-06-26T10:00:00Z") → a date; anything
    else → None. Sources read their own formats; the model only accepts what they hand over."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    match = _ISO_DATE_RE.match(value) if isinstance(value, str) else None
    if not match:
        return None
    try:
        return dt.date(*map(int, match.groups()))
    except ValueError:
        return None


def distinct_list(value: Any) -> list[str]:
    """One value or several → a list of distinct non-blank strings, in order."""
    if value is None:
        return []
    values = [value] if isinstance(value, str) else list(value)
    return list(dict.fromkeys(text for text in (blank_to_none(str(v)) for v in values if v is not None) if text))


class TypeModel(BaseModel):
    """Base of the models in this folder. A subclass names its date field in `date_field`."""

    model_config = ConfigDict(extra="forbid", str_max_length=MAX_TEXT_CHARS)
    date_field: ClassVar[str | None] = None

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = {key: blank_to_none(value) for key, value in data.items()}
        if data.get("extra") is None:
            data["extra"] = {}
        if data.get("source_lang") is None:
            data.pop("source_lang", None)
        if cls.date_field:
            raw = data.get(cls.date_field)
            parsed = iso_date(raw)
            data[cls.date_field] = parsed
            # Never invented: no date (or one that cannot be read) is a date-unknown record.
            data["date_unknown"] = parsed is None
            if parsed is None and raw is not None:
                data["extra"] = {**data["extra"], f"unparsed_{cls.date_field}": str(raw)[:200]}
        return data

    def to_row(self) -> dict[str, Any]:
        """The record as store columns (dates as ISO text; lists and extra stay as they are)."""
        row = dict(self.__dict__)
        for name, value in row.items():
            if isinstance(value, dt.date):
                row[name] = value.isoformat()
        return row
