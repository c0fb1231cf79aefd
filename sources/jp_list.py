"""MLIT (Japan): the records of one recall list PDF, from the tables (and text lines) that
`basecrawler.formats.pdf` extracted. Two layouts: one recall per page block (labelled cells
リコール届出番号 … above a vehicle table) and the monthly small-batch table (one row per
届出番号). Works on JSON only (the pages as dicts), so a dead letter can be parsed again.
An OCR'd number or date that is not trusted is left empty and flagged, never guessed
(sources/jp_cells.py reads one cell's value).
"""
from __future__ import annotations

import datetime as dt
import re

from basecrawler.formats.dates import parse_date
from basecrawler.formats.text import distinct_joined
from sources.jp_cells import (Cell, cell_at, count_of, date_of, join_lines, recall_number_of, similar, split_range,
                              squash)


SINGLE_LABELS = {
    "recall_number": "リコール届出番号",
    "start_date": "リコール開始日",
    "notifier": "届出者の氏名又は名称",
    "component": "不具合の部位（部品名）",
    "defect_cause": "基準不適合状態にあると認める構造、装置又は性能の状況及びその原因",
    "remedy": "改善措置の内容",
}
VEHICLE_HEADER = {
    "maker": "車名", "type_code": "型式", "name": "通称名",
    "range": "リコール対象車の車台番号の範囲及び製作期間", "units": "リコール対象車の台数", "remarks": "備考",
}
BATCH_HEADER = {
    "notifier": "届出者", "date": "届出日", "number": "届出番号", "vehicle": "車名・型式・通称名",
    "units": "対象台数", "period": "製作期間", "component": "不具合の部位等",
}
_METHOD_RANK = {"text": 0, "text-fallback": 1, "ocr": 2}


def _rows(doc: dict):
    for p, page in enumerate(doc.get("pages") or []):
        confidence = page.get("confidence") or []
        for t, table in enumerate(page.get("tables") or []):
            for r, row in enumerate(table):
                confs = confidence[t][r] if t < len(confidence) and r < len(confidence[t]) else []
                yield p, [Cell(text or "", confs[c] if c < len(confs) else None, page["method"])
                          for c, text in enumerate(row)], row


# ---- the other form: text fields as label + text lines above the vehicle table ---------------
# Some lists print 届出者 / 不具合の部位（部品名） / …状況及びその原因 / 改善措置の内容 as a label
# line (sometimes numbered, sometimes "label：text") followed by text lines, not as table cells.
TEXT_LINE_KEYS = ("notifier", "component", "defect_cause", "remedy")
_ENUMERATOR = re.compile(r"^(?:[（(]?[0-9一二三四五六七八九十]{1,2}[)）.．、]|[■□●○◆◇・※])")


def _text_label(squashed: str) -> tuple[str | None, str]:
    """(field, text on the same line) when a squashed line is one of the text labels."""
    line = _ENUMERATOR.sub("", squashed)
    for key in TEXT_LINE_KEYS:
        label = squash(SINGLE_LABELS[key])
        if line.startswith(label):
            return key, line[len(label):].lstrip(":：")
        if similar(line.rstrip(":："), label) >= 0.85:
            return key, ""
    return None, ""


def text_line_fields(page: dict) -> list[dict]:
    """The label + text fields of one page's text, one dict per recall (a new one starts at each
    リコール届出番号 after fields were found). A field's text ends at the next label, the next
    リコール届出番号, the vehicle table (a line starting 車名, or the text of a table cell)."""
    cell_lines = {squash(line) for table in page.get("tables") or [] for row in table for cell in row
                  for line in (cell or "").split("\n") if line.strip()}
    segments: list[dict] = [{}]
    key, lines = None, []

    def close():
        if key and lines:
            segments[-1].setdefault(key, "\n".join(lines))

    for line in (page.get("text") or "").split("\n"):
        squashed = squash(line)
        if not squashed:
            continue
        if "リコール届出番号" in squashed:
            close()
            key, lines = None, []
            if segments[-1]:
                segments.append({})
            continue
        found, rest = _text_label(squashed)
        if found:
            close()
            key, lines = found, ([rest] if rest else [])
        elif key and (squashed in cell_lines or squashed.startswith("車名")):
            close()
            key, lines = None, []
        elif key:
            lines.append(line.strip())
    close()
    return segments


def _fill_from_text_lines(recalls: list[dict], doc: dict) -> None:
    """Single-layout recalls whose text fields were not table cells take them from the label +
    text lines of the page their 届出番号 is on (k-th recall of a page ↔ k-th segment)."""
    pages = doc.get("pages") or []
    by_page: dict[int, list[dict]] = {}
    for recall in recalls:
        if recall["layout"] == "single" and "page" in recall:
            by_page.setdefault(recall["page"], []).append(recall)
    for p, on_page in by_page.items():
        if all(all(k in r["cells"] for k in TEXT_LINE_KEYS) for r in on_page):
            continue
        segments = text_line_fields(pages[p])
        for recall, fields in zip(on_page, segments):
            for key, text in fields.items():
                if not (recall["cells"].get(key) and recall["cells"][key].text):
                    recall["cells"][key] = Cell(text, None, pages[p].get("method", "text"))


def records_from_list(doc: dict) -> tuple[list[dict], list[tuple[list, str]]]:
    """Records of one recall list PDF (either layout; text fields as table cells or as label +
    text lines), and the row groups that could not
    become a record (an unreadable 届出番号) with the reason."""
    press_date = parse_date(doc.get("press_date")) or parse_date(doc.get("feed_date"))
    recalls: list[dict] = []
    current: dict | None = None
    mode, columns = None, {}
    for page_index, cells, raw_row in _rows(doc):
        if not any(c.text for c in cells):
            continue
        header = _header_columns(cells, VEHICLE_HEADER, required=("maker", "name", "units"))
        if header:
            mode, columns = "vehicles", header
            continue
        header = _header_columns(cells, BATCH_HEADER, required=("number", "date", "units"))
        if header:
            mode, columns = "batch", header
            continue
        labelled = _label_pairs(cells)
        if labelled:
            mode = None
            if "recall_number" in labelled or current is None:
                current = _new_recall("single")
                current["page"] = page_index
                recalls.append(current)
            for key, cell in labelled.items():
                current["cells"][key] = cell
            current["rows"].append(raw_row)
            continue
        if mode == "vehicles" and current is not None:
            _vehicle_row(current, cells, columns)
            current["rows"].append(raw_row)
        elif mode == "batch":
            number = cell_at(cells, columns, "number")
            if number.text or current is None or current.get("layout") != "batch":
                current = _new_recall("batch")
                recalls.append(current)
                for key in ("number", "date", "notifier", "component"):
                    current["cells"][key] = cell_at(cells, columns, key)
            _batch_vehicle(current, cells, columns)
            current["rows"].append(raw_row)
    _fill_from_text_lines(recalls, doc)
    records, rejected = [], []
    for recall in recalls:
        record = _finish(recall, doc, press_date)
        if isinstance(record, str):
            rejected.append((recall["rows"], record))
        else:
            records.append(record)
    return _merge_same_number(records), rejected


def _new_recall(layout: str) -> dict:
    return {"layout": layout, "cells": {}, "vehicles": [], "flags": {}, "methods": set(), "rows": [], "total": None}


def _header_columns(cells: list[Cell], header: dict, required: tuple) -> dict | None:
    """Column index of each field when the row is that table's header (OCR may misread a
    character or two of a header, so the match is fuzzy)."""
    columns = {}
    for field, label in header.items():
        scores = [(similar(c.text, label), i) for i, c in enumerate(cells)]
        score, index = max(scores) if scores else (0, None)
        if score >= 0.75:
            columns[field] = index
    if all(key in columns for key in required) and len(columns) >= len(header) - 1:
        return columns
    return None


def _label_pairs(cells: list[Cell]) -> dict:
    found = {}
    for i, cell in enumerate(cells[:-1]):
        best = max(((similar(cell.text, label), key) for key, label in SINGLE_LABELS.items()), default=(0, None))
        if best[0] >= 0.75:
            found[best[1]] = cells[i + 1]
    return found


def _vehicle_row(recall: dict, cells: list[Cell], columns: dict) -> None:
    maker, type_code, name = (cell_at(cells, columns, k) for k in ("maker", "type_code", "name"))
    units = cell_at(cells, columns, "units")
    recall["methods"].update(c.method for c in cells)
    if not type_code.text and not name.text:   # the 合計 (total) row
        recall["total"] = count_of(units, recall["flags"], "total_units")
        return
    chassis, period = split_range(cell_at(cells, columns, "range").text)
    previous = recall["vehicles"][-1] if recall["vehicles"] else {}
    recall["vehicles"].append({
        # A blank 車名 continues the one above (merged cells in many lists).
        "maker": join_lines(maker.text) or previous.get("maker"),
        "type_code": join_lines(type_code.text) or None,
        "name": join_lines(name.text) or None,
        "chassis_range": chassis, "production_period": period,
        "units": count_of(units, recall["flags"], f"vehicles[{len(recall['vehicles'])}].units"),
        "remarks": join_lines(cell_at(cells, columns, "remarks").text) or None,
    })


def _batch_vehicle(recall: dict, cells: list[Cell], columns: dict) -> None:
    lines = [line.strip() for line in cell_at(cells, columns, "vehicle").text.split("\n") if line.strip()]
    maker = lines[0] if lines else None
    type_code = lines[1] if len(lines) >= 3 else None
    name = join_lines("\n".join(lines[2:] if len(lines) >= 3 else lines[1:])) or None
    recall["methods"].update(c.method for c in cells)
    recall["vehicles"].append({
        "maker": maker, "type_code": type_code, "name": name,
        "production_period": join_lines(cell_at(cells, columns, "period").text) or None,
        "units": count_of(cell_at(cells, columns, "units"), recall["flags"], f"vehicles[{len(recall['vehicles'])}].units"),
    })


def _finish(recall: dict, doc: dict, press_date: dt.date | None) -> dict | str:
    cells, flags = recall["cells"], recall["flags"]
    methods = recall["methods"] | {c.method for c in cells.values()}
    method = max(methods, key=lambda m: _METHOD_RANK.get(m, 0)) if methods else "text"
    batch = recall["layout"] == "batch"
    number = recall_number_of(cells.get("number" if batch else "recall_number"))
    if number is None:
        raw = cells.get("number" if batch else "recall_number")
        return f"unreadable 届出番号 {raw.text if raw else ''!r} ({method})"
    date_cell = cells.get("date" if batch else "start_date")
    date_name = "notified_date" if batch else "recall_start_date"
    date = date_of(date_cell, flags, date_name, press_date)
    vehicles = recall["vehicles"]
    units = [v["units"] for v in vehicles]
    affected = sum(units) if vehicles and all(u is not None for u in units) else None
    if recall["total"] is not None and affected is not None and recall["total"] != affected:
        flags["affected_units"] = f"rows sum to {affected} but the total says {recall['total']}"
        affected = None   # one of them is misread and nothing says which
    elif affected is None and recall["total"] is not None and not any(k.startswith("vehicles") for k in flags):
        affected = recall["total"]
    elif affected is None and vehicles:
        flags.setdefault("affected_units", "a vehicle count is unreadable")

    def text(key):
        cell = cells.get(key)
        return join_lines(cell.text) or None if cell else None

    extra = {
        "layout": "small_batch" if batch else "single",
        "read_method": method,
        "notifier": text("notifier"),
        date_name: date.isoformat() if date else None,
        "vehicles": vehicles,
        "press_url": doc.get("press_url"), "press_title": doc.get("press_title"),
        "press_date": doc.get("press_date"), "pdf_url": doc.get("pdf_url"),
    }
    if recall["total"] is not None:
        extra["total_units_stated"] = recall["total"]
    if flags:
        extra["unreadable"] = flags
    if doc.get("pdf_changed"):
        extra["pdf_changed"] = True
    return {
        "recall_number": number,
        "recall_date": date or press_date,
        "manufacturer_original": distinct_joined((v["maker"] for v in vehicles), "、"),
        "model_original": distinct_joined((v["name"] for v in vehicles), "、"),
        "component_original": text("component"),
        "defect_cause_original": None if batch else text("defect_cause"),
        "remedy_original": None if batch else text("remedy"),
        "affected_units": affected,
        "source_url": doc.get("press_url"),
        "extra": extra,
    }


def _merge_same_number(records: list[dict]) -> list[dict]:
    """A recall listed on two pages (or twice) is one record."""
    merged: dict[str, dict] = {}
    for record in records:
        kept = merged.get(record["recall_number"])
        if kept is None:
            merged[record["recall_number"]] = record
            continue
        kept["extra"]["vehicles"].extend(record["extra"]["vehicles"])
        if kept["affected_units"] is not None and record["affected_units"] is not None:
            kept["affected_units"] += record["affected_units"]
        else:
            kept["affected_units"] = None
        for key, value in record.items():
            if kept.get(key) is None and value is not None:
                kept[key] = value
    return list(merged.values())
