"""Guards against what a translator's answer may carry besides a translation: its size, and
markup, script, links or control characters that the original does not have.

The answer is stored in `_ko` columns and leaves through every export and page; a backend is
a remote program we do not control (a proxy, an LLM told "ignore the instructions" by the
text it translates). A Korean rendering of a recall notice adds words, never a tag, an entity,
a URL, a `javascript:` or a bidi override, so anything of these kinds that is not in the
original blocks the answer, with the reason.
"""
from __future__ import annotations

import re
import unicodedata

# Korean is at most ~4 times the characters of Japanese and well under 3 times English; an
# answer beyond this many characters per source character (plus slack for short sources)
# is not a translation, and the checks after this one are not made to read it.
MAX_ANSWER_RATIO = 8
MAX_ANSWER_SLACK = 200
# The bytes one backend answer may have, per byte of the request that asked for it (Hangul is
# 3 bytes of UTF-8, 6 as a JSON \\u escape; the length ratio above), plus a fixed allowance
# for the envelope. Read as a stream: the answer stops there.
ANSWER_BYTES_PER_REQUEST_BYTE = 16
ANSWER_BYTES_FIXED = 1 << 20

# A tag is known by its opening: `<script`, `</b`, `<!--`, `<?php` (what follows may differ
# between source and answer without being markup).
_TAG = re.compile(r"<\s*/?\s*(?:[A-Za-z][A-Za-z0-9:-]*|!--|!\[CDATA\[|![A-Za-z]+|\?[A-Za-z]*)")
_ENTITY = re.compile(r"&(?:#\d{1,7}|#[xX][0-9A-Fa-f]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_SCHEME = re.compile(r"(?<![A-Za-z])(?:javascript|vbscript|data|file)\s*:", re.IGNORECASE)
# ASCII only, so a Korean particle written onto a kept link ("https://a.example에서") is not
# part of it; the source's own links come back unchanged (translate/protect.py masks them).
_LINK = re.compile(r"(?:https?|ftp)://[A-Za-z0-9\-._~%!$&*+,;=:@/?#\[\]]+|(?<![\w.])www\.[A-Za-z0-9\-._~%/]+",
                   re.IGNORECASE)
_HANDLER = re.compile(r"(?<![A-Za-z])on[a-z]{3,20}\s*=", re.IGNORECASE)
_FENCE = re.compile(r"```|\{\{|\}\}|\$\{")
_KINDS = (("tag", _TAG), ("entity", _ENTITY), ("script", _SCHEME), ("script", _HANDLER), ("link", _LINK),
          ("template", _FENCE))
_ALLOWED_CONTROLS = frozenset("\t\n\r")


def max_answer_chars(source: str) -> int:
    return MAX_ANSWER_RATIO * len(source) + MAX_ANSWER_SLACK


def max_answer_bytes(request_bytes: int) -> int:
    """The most bytes a backend's answer to a request of `request_bytes` may have."""
    return ANSWER_BYTES_FIXED + ANSWER_BYTES_PER_REQUEST_BYTE * request_bytes


def too_long(source: str, output: str) -> str | None:
    if len(output) > max_answer_chars(source):
        return f"answer too long: {len(output)} characters for {len(source)} in the source"
    return None


def _found(pattern: re.Pattern, text: str) -> list[str]:
    """The matches of `pattern` in `text`, normalised, first occurrence first."""
    found = ("".join(m.group(0).lower().split()) for m in pattern.finditer(text))
    return list(dict.fromkeys(f.rstrip(".,;:)") if pattern is _LINK else f for f in found))


def _controls(text: str) -> set[str]:
    """Control, format, private-use and unassigned characters (bidi overrides, zero-width
    joiners, NUL, ESC …), tab and line breaks aside."""
    return {ch for ch in text if ch not in _ALLOWED_CONTROLS and unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs", "Cn")}


def foreign_markup(source: str, output: str) -> str | None:
    """The reason to block `output` when it has markup or control characters `source` lacks."""
    extra = _controls(output) - _controls(source)
    if extra:
        names = ", ".join(f"U+{ord(ch):04X}" for ch in sorted(extra)[:3])
        return f"control character not in the original: {names}"
    for kind, pattern in _KINDS:
        known = set(_found(pattern, source))
        added = [f for f in _found(pattern, output) if f not in known]
        if added:
            sample = added[0][:40]
            return f"{kind} not in the original: {sample!r}"
    return None


__all__ = ["foreign_markup", "too_long", "max_answer_chars", "max_answer_bytes"]
