"""Field helpers every type's model uses, so each model normalises the way the store expects:

- `blank_to_none` / `clean_strings`: blank text is None (a blank never erases a stored value),
  C0/C1 control characters go, line ends become "\\n";
- `refuse_wrong_types`: a list or object where text is declared is a validation refusal;
- `Text`: an optional text field of at most MAX_TEXT_CHARS characters;
- `date_or_unknown`: the unknown-date rule: a date that cannot be read is kept as unknown (the
  type's sentinel or None, `date_unknown = True`, the raw text in `extra`), never dropped and
  never guessed;
- `parse_date`, `normalize_digits`: the date parser and digit normaliser the sources share.

A type module imports these from here (basecrawler.recordtypes.fields), never the framework.
"""
from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any

from pydantic import Field

from basecrawler.formats.dates import normalize_digits, parse_date

# C0/C1 control characters other than tab and newline: never meaningful in published text,
# and they break terminals, CSV consumers and translation backends.
_CONTROL_CHARS_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# A text field longer than this is a broken page or a runaway field, not a description.
MAX_TEXT_CHARS = 100_000

Text = Annotated[str | None, Field(default=None, max_length=MAX_TEXT_CHARS)]


def blank_to_none(value: Any) -> Any:
    if isinstance(value, str):
        if not value.isprintable():
            value = _CONTROL_CHARS_RE.sub("", value.replace("\r\n", "\n").replace("\r", "\n"))
        value = value.strip()
        return value or None
    return value


def clean_strings(data: dict) -> dict:
    """`blank_to_none` over every text value of a model's input (a `mode="before"` validator),
    as a copy. Runs on every field of every record, and most texts are printable and stripped
    already: the copy keeps those as they are (`str.strip` gives the very text back when it
    has nothing to strip) and only the others are replaced. A list (a multi-valued field) must
    hold text or numbers only: a list or object inside one is refused (a validation dead
    letter), never written as its Python repr (`"['Food', 'Toys']"`)."""
    cleaned = data.copy() if data.__class__ is dict else dict(data)
    for key, value in data.items():
        if value.__class__ is str:
            if not value or _strip(value) is not value or not value.isprintable():
                cleaned[key] = blank_to_none(value)
        elif value.__class__ in _SEQUENCES:
            _flat_values(key, value)
    return cleaned


_strip = str.strip
_SEQUENCES = frozenset((list, tuple))
_SCALARS = (str, int, float)


def _flat_values(field: str, values: list | tuple) -> list | tuple:
    for value in values:
        if value is not None and not isinstance(value, _SCALARS):
            raise ValueError(f"{field}: a {type(value).__name__} inside a list of values; each value must be text")
    return values


def refuse_wrong_types(title: str, fields: dict[str, Any]) -> None:
    """Raise the model's kind of refusal (a pydantic ValidationError: the item becomes a
    `validation` dead letter) for each field given a list or an object where the record type
    declares text. For a source that cleans published values before the model sees them, so
    that no cleaning step turns a structure into its repr."""
    from pydantic_core import InitErrorDetails, ValidationError

    errors = [InitErrorDetails(type="string_type", loc=(name,), input=value) for name, value in fields.items()
              if value is not None and not isinstance(value, _SCALARS)]
    if errors:
        raise ValidationError.from_exception_data(title, errors)


def date_or_unknown(data: dict, field: str, sentinel: dt.date | None = None, *, day_first: bool = True) -> dict:
    """Read `data[field]` as a date in place. Unreadable or absent: the field becomes
    `sentinel` (None when the type stores unknown dates as NULL) and a published value that
    could not be read is kept in `extra["unparsed_<field>"]`. With a sentinel the model's
    `date_unknown` field is set too (a sentinel date must be told apart from a real one; a
    None date says it itself, and the store derives `date_unknown` from it)."""
    raw = data.get(field)
    parsed = parse_date(raw, day_first=day_first)
    if parsed is None:
        data[field] = sentinel
        if sentinel is not None:
            data["date_unknown"] = True
        if raw is not None:
            extra = dict(data.get("extra") or {})
            extra.setdefault(f"unparsed_{field}", str(raw))
            data["extra"] = extra
    else:
        data[field] = parsed
    return data


__all__ = ["MAX_TEXT_CHARS", "Text", "blank_to_none", "clean_strings", "refuse_wrong_types", "date_or_unknown", "normalize_digits",
           "parse_date"]
