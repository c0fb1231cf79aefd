"""Text helpers every source needs for the fields it stores: one cleaning rule (markup, mojibake,
placeholders, blanks) and one way to list distinct values. A source adds only its own quirks."""
from __future__ import annotations

import html
import re
from typing import Iterable

from basecrawler.formats.textcodec import repair_text

_TAG_RE = re.compile(r"</?\s*[A-Za-z][A-Za-z0-9:-]*(?:\s[^<>]*)?/?>")


_SPACE_BEFORE_STOP = re.compile(r"\s+([.,;:!?])")


def plain_text(value) -> str | None:
    """A publisher's field that may carry HTML, as plain text: tags and entities gone, white
    space squashed, a number as its text, and no space left before a full stop where a tag
    was dropped ("<b>peanuts</b>." → "peanuts.")."""
    if value is None:
        return None
    if not isinstance(value, str):
        value = str(value)
    text = clean_text(value, markup=True, squash_space=True)
    return _SPACE_BEFORE_STOP.sub(r"\1", text) if text and "<" in value else text


def clean_text(value: str | None, *, absent: Iterable[str] = (), markup: bool = False,
               squash_space: bool = False) -> str | None:
    """Source text → the text to store, or None for nothing: stripped; HTML tags and entities
    removed when `markup`; mojibake repaired where it is reliable (`textcodec.repair_text`);
    runs of white space as one space when `squash_space`; a placeholder in `absent` (compared
    lower-case, e.g. "unknown") is None."""
    if value is None:
        return None
    text = value
    if markup and "<" in text and _TAG_RE.search(text):
        text = _TAG_RE.sub(" ", text)
    if markup and "&" in text:
        text = html.unescape(text)
    if not text.isascii():
        text = repair_text(text)[0]   # UTF-8 decoded twice upstream ("MÃ¼ller")
    if squash_space:
        # str.split() splits on exactly what `\s` matches (both ask Py_UNICODE_ISSPACE, no-break
        # space included) and drops the ends: re.sub(r"\s+", " ", text).strip(), ~3× faster.
        text = " ".join(text.split())
    else:
        text = text.strip()
    if absent and text.lower() in absent:
        return None
    return text or None


def distinct_joined(values: Iterable[str | None], separator: str = ", ") -> str | None:
    """Distinct non-empty values in order of first appearance, joined; None when there are none."""
    return separator.join(dict.fromkeys(value for value in values if value)) or None


__all__ = ["clean_text", "distinct_joined"]
