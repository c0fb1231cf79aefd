"""Geometry of a page: ruled table lines found in a rendered image, and text boxes placed into
table cells and joined into lines (for the pypdfium2 fallback and for OCR alike)."""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

from basecrawler.formats.pdfpage import DEFAULT_DPI


@dataclass
class Box:
    """A piece of text with its position (pixels or points, top-left origin)."""

    text: str
    left: float
    top: float
    right: float
    bottom: float
    conf: float | None = None

    @property
    def cx(self) -> float:
        return (self.left + self.right) / 2

    @property
    def cy(self) -> float:
        return (self.top + self.bottom) / 2

    @property
    def height(self) -> float:
        return self.bottom - self.top



@dataclass
class RuledLine:
    """A ruled line found in a page image: position across, extent along, in pixels."""

    at: float
    start: int
    end: int
    thickness: int = 1


def _runs(image, min_length: int) -> list[tuple[int, int, int]]:
    """(row, start, end) of every run of ink at least `min_length` pixels long."""
    width = image.width
    data = image.tobytes()
    pattern = re.compile(rb"\x00{%d,}" % min_length)
    found = []
    for row in range(image.height):
        for match in pattern.finditer(data, row * width, (row + 1) * width):
            found.append((row, match.start() - row * width, match.end() - row * width))
    return found


def _merge_runs(runs) -> list[RuledLine]:
    """Adjacent rows' overlapping runs are one thick line."""
    lines: list[dict] = []
    open_lines: list[dict] = []
    for row, start, end in runs:
        target = None
        for line in open_lines:
            if row - line["last"] <= 2 and start < line["end"] and end > line["start"]:
                target = line
                break
        if target is None:
            target = {"first": row, "last": row, "start": start, "end": end}
            lines.append(target)
            open_lines.append(target)
        target["last"] = row
        target["start"], target["end"] = min(target["start"], start), max(target["end"], end)
        open_lines = [line for line in open_lines if row - line["last"] <= 2]
    return [RuledLine((l["first"] + l["last"]) / 2, l["start"], l["end"], l["last"] - l["first"] + 1) for l in lines]


def find_grid_lines(ink, dpi: int = DEFAULT_DPI) -> tuple[list[RuledLine], list[RuledLine]]:
    """Horizontal and vertical ruled lines: runs of ink longer than any stroke of 10-16 pt text."""
    from PIL import Image

    horizontal = _merge_runs(_runs(ink, max(20, int(dpi * 0.4))))
    vertical = _merge_runs(_runs(ink.transpose(Image.Transpose.TRANSPOSE), max(15, int(dpi * 0.25))))
    return horizontal, vertical


def erase_lines(ink, horizontal: list[RuledLine], vertical: list[RuledLine]) -> None:
    from PIL import ImageDraw

    draw = ImageDraw.Draw(ink)
    for line in horizontal:
        half = line.thickness / 2 + 1
        draw.rectangle([line.start - 1, line.at - half, line.end + 1, line.at + half], fill=255)
    for line in vertical:
        half = line.thickness / 2 + 1
        draw.rectangle([line.at - half, line.start - 1, line.at + half, line.end + 1], fill=255)


def grid_cells(horizontal: list[RuledLine], vertical: list[RuledLine], dpi: int = DEFAULT_DPI) -> list[list[list[tuple]]]:
    """Tables as rows of cell boxes (left, top, right, bottom) from the ruled lines: each band
    between two horizontal lines is a row, split by the vertical lines crossing it; a band no
    vertical line crosses is the gap between two tables."""
    tolerance = dpi * 0.03
    rules = sorted(horizontal, key=lambda l: l.at)
    tables: list[list[list[tuple]]] = []
    current: list[list[tuple]] = []
    for upper, lower in zip(rules, rules[1:]):
        left, right = max(upper.start, lower.start), min(upper.end, lower.end)
        if right - left < dpi * 0.2 or lower.at - upper.at < dpi * 0.08:
            continue
        middle = (upper.at + lower.at) / 2
        crossing = sorted(v.at for v in vertical
                          if v.start - tolerance <= upper.at + 2 and v.end + tolerance >= lower.at - 2
                          and left - tolerance <= v.at <= right + tolerance and v.start <= middle <= v.end)
        crossing = [x for i, x in enumerate(crossing) if i == 0 or x - crossing[i - 1] > tolerance]
        if len(crossing) < 2:
            if current:
                tables.append(current)
                current = []
            continue
        current.append([(a, upper.at, b, lower.at) for a, b in zip(crossing, crossing[1:])])
    if current:
        tables.append(current)
    return tables



# ---- cells from boxes -------------------------------------------------------------------------------

def fill_grids(grids, boxes: list[Box], with_confidence: bool = False):
    """Put every box into the grid cell holding its centre; return the tables (and the lowest
    confidence per cell)."""
    tables, confidences = [], []
    placed: dict[tuple, list[Box]] = {}
    for t, grid in enumerate(grids):
        for r, row in enumerate(grid):
            for c, cell in enumerate(row):
                placed[(t, r, c)] = []
    for box in boxes:
        for t, grid in enumerate(grids):
            hit = _locate(grid, box)
            if hit is not None:
                placed[(t, *hit)].append(box)
                break
    for t, grid in enumerate(grids):
        table, table_conf = [], []
        for r, row in enumerate(grid):
            cells, confs = [], []
            for c, cell in enumerate(row):
                inside = placed[(t, r, c)]
                cells.append("\n".join(lines_text(group_lines(inside))) if cell is not None else "")
                known = [b.conf for b in inside if b.conf is not None]
                confs.append(min(known) if known else None)
            table.append(cells)
            table_conf.append(confs)
        tables.append(table)
        confidences.append(table_conf)
    return (tables, confidences) if with_confidence else (tables, None)


def _locate(grid, box: Box) -> tuple[int, int] | None:
    for r, row in enumerate(grid):
        for c, cell in enumerate(row):
            if cell is None:
                continue
            left, top, right, bottom = cell
            if left <= box.cx <= right and top <= box.cy <= bottom:
                return r, c
    return None


def group_lines(boxes: list[Box]) -> list[list[Box]]:
    """Boxes into text lines, top to bottom, each left to right."""
    if not boxes:
        return []
    typical = statistics.median(b.height for b in boxes) or 1
    lines: list[list[Box]] = []
    for box in sorted(boxes, key=lambda b: b.cy):
        if lines and abs(box.cy - statistics.fmean(b.cy for b in lines[-1])) <= typical * 0.5:
            lines[-1].append(box)
        else:
            lines.append([box])
    return [sorted(line, key=lambda b: b.left) for line in lines]


def lines_text(lines: list[list[Box]]) -> list[str]:
    out = []
    for line in lines:
        text = ""
        previous = None
        for box in line:
            if previous is not None and _needs_space(previous, box):
                text += " "
            text += box.text
            previous = box
        text = re.sub(r"\s+", " ", text).strip()
        if text:
            out.append(text)
    return out


def _needs_space(previous: Box, box: Box) -> bool:
    """Japanese has no spaces between words; Latin words and numbers do."""
    gap = box.left - previous.right
    height = max(previous.height, box.height, 1)
    latin = previous.text[-1:].isascii() and box.text[:1].isascii()
    return latin and gap > height * 0.3
