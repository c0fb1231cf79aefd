"""Terminal tables padded by display width, not by characters.

A Japanese or Korean character takes two terminal columns, so padding by `len()` (what
f-string widths do) pushes every column after a CJK cell out of line. `render_table` measures
cells with `wcwidth` (East Asian Width, zero-width combining marks) and pads with spaces.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from wcwidth import wcswidth, wcwidth


def display_width(text: str) -> int:
    """Terminal columns `text` takes; a non-printable character counts as one column."""
    width = wcswidth(text)
    if width >= 0:
        return width
    return sum(max(wcwidth(ch), 0) if ch.isprintable() else 1 for ch in text)


def clip(text: str, width: int) -> str:
    """`text` cut to at most `width` columns, with … when something was cut."""
    if display_width(text) <= width:
        return text
    out, used = [], 0
    for ch in text:
        w = max(wcwidth(ch), 0)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…"


def pad(text: str, width: int, align: str = "<") -> str:
    gap = " " * max(width - display_width(text), 0)
    return gap + text if align == ">" else text + gap


def render_table(headers: Sequence[str], rows: Iterable[Sequence], *, align: Sequence[str] | None = None,
                 max_width: int | None = None, gap: str = "  ") -> str:
    """Header, a rule, then one line per row; every column as wide as its widest cell in
    display columns. `align` per column: "<" (default) or ">" (numbers); `max_width` clips
    every cell to that many columns. None prints as an empty cell. No trailing spaces."""
    def cell(value) -> str:
        text = "" if value is None else " ".join(str(value).split())
        return clip(text, max_width) if max_width else text

    head = [cell(h) for h in headers]
    body = [[cell(v) for v in row] for row in rows]
    widths = [max([display_width(r[i]) for r in [head, *body]]) for i in range(len(head))]
    aligns = list(align or []) + ["<"] * (len(head) - len(align or []))

    def line(cells) -> str:
        return gap.join(pad(c, w, a) for c, w, a in zip(cells, widths, aligns)).rstrip()

    return "\n".join([line(head), gap.join("-" * w for w in widths), *(line(r) for r in body)])


__all__ = ["render_table", "display_width", "clip", "pad"]
