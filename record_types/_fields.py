"""What the models of this folder share (not a type: the leading underscore keeps discovery
away): `TypeModel` applies the framework's field rules (basecrawler.recordtypes.fields) — blank
text is None, control characters go, runaway text is refused — and the unknown-date rule: a date
that is missing or unreadable makes the record date-unknown (a NULL date, `date_unknown`, the raw
value in `extra`), never costs it and is never invented."""
from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator

from basecrawler.recordtypes.fields import MAX_TEXT_CHARS, blank_to_none, clean_strings, date_or_unknown


def distinct_list(value: Any) -> list[str]:
    """One value or several → a list of distinct non-blank strings, in order."""
    if value is None:
        return []
    values = [value] if isinstance(value, str) else list(value)
    if all(v.__class__ is str and v and v.isprintable() and v.strip() == v for v in values) \
            and len(set(values)) == len(values):
        return values   # already clean, the common case: no copy per value
    return list(dict.fromkeys(text for text in (blank_to_none(str(v)) for v in values if v is not None) if text))


class TypeModel(BaseModel):
    """Base of the models in this folder. A subclass names its date field in `date_field`."""

    model_config = ConfigDict(extra="forbid", str_max_length=MAX_TEXT_CHARS)
    date_field: ClassVar[str | None] = None
    # Fields normalised here rather than by a field validator each (one Python call per record
    # instead of one per field and record): text upper-cased, and lists of distinct strings.
    upper_fields: ClassVar[tuple[str, ...]] = ()
    list_fields: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = clean_strings(data)
        for name in cls.upper_fields:
            value = data.get(name)
            if value.__class__ is str:
                data[name] = value.upper()
        for name in cls.list_fields:
            if name in data:
                data[name] = distinct_list(data[name])
        if data.get("extra") is None:
            data["extra"] = {}
        if data.get("source_lang") is None:
            data.pop("source_lang", None)
        if cls.date_field:
            date_or_unknown(data, cls.date_field)   # sources hand over ISO text or a date
            data["date_unknown"] = data[cls.date_field] is None
        return data

