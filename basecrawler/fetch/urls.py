"""URL paths built from publisher data: each value is one path segment, never a path."""
from __future__ import annotations

from urllib.parse import quote

from basecrawler.errors import UnsafePath


def path_segment(value) -> str:
    """`value` encoded as exactly one path segment: `/`, `?`, `#`, `%` and every other reserved
    character escaped. A value that a URL resolver would treat as a step (`.`, `..`, also once
    percent-decoded) or that is empty is refused with `UnsafePath`: a feed must not decide
    which path we request (a release named `../../etc/passwd`)."""
    text = str(value)
    if text.strip() in ("", ".", "..") or "\x00" in text:
        raise UnsafePath(f"refused a path segment built from publisher data: {text!r}")
    return quote(text, safe="")


__all__ = ["path_segment"]
