"""DVSA vehicle recalls (United Kingdom): `RecallsFile.csv`, one record per recall number with
its models and VIN ranges, as `vehicle_recall` records.

Where the data comes from: `https://www.check-vehicle-recalls.service.gov.uk/documents/
RecallsFile.csv`, the whole history in one file (Open Government Licence v3), so incremental
and full runs read the same download. Columns: Launch Date, Recalls Number, Make, Recalls
Model Information, Concern, Defect, Remedy, Vehicle Numbers, Manufacturer Ref, Model, VIN
Start, VIN End, Build Start, Build End.

Rules decided from the published data (see also fixtures/uk/README.md):

- Grouping. One row per recall and model / VIN range: a recall number repeats, and nothing
  promises its rows are adjacent. The file is streamed to disk, then read once into a dict of
  recall number → rows (the whole history is a few MB), and each recall is yielded with all
  its rows; the models (distinct, in file order) and every VIN / build range are kept
  (`extra["vehicles"]`).
- Encoding. The file may not be UTF-8 (Windows-1252 has been seen): `textcodec.file_encoding`
  decides, and bytes that are not UTF-8 are read as Windows-1252 (with a WARNING).
- Dates DD/MM/YYYY, sometimes with a trailing '.' ("03/06/2024."): the '.' is dropped. An
  unreadable launch date keeps the recall with its date unknown (the model's sentinel), the
  text kept in `extra["launch_date_published"]`. Build dates are kept as ISO when readable.
- Vehicle Numbers is the recall's count repeated on its rows: taken once (the largest when rows
  disagree, every distinct value kept in `extra["units_reported"]`), never summed.
- Text: Concern → summary, Defect → defect / cause, Remedy → remedy (the first non-empty cell of
  the recall's rows); Make → manufacturer; Recalls Model Information and Manufacturer Ref in extra.
"""
from __future__ import annotations

import csv
import io
import logging
from typing import Iterator

from basecrawler import BaseCrawler, UnexpectedContent
from basecrawler.formats import text as text_rules
from basecrawler.formats.dates import parse_date
from basecrawler.formats.text import distinct_joined
from basecrawler.formats.textcodec import LEGACY_BYTES, file_encoding
from basecrawler.model import parse_units

log = logging.getLogger(__name__)

FILE_PATH = "/documents/RecallsFile.csv"
NUMBER = "Recalls Number"
REQUIRED = (NUMBER, "Launch Date", "Make", "Model")
# A runaway quoted field must cost its recall, not the file (csv refuses fields over 128 KiB).
MAX_FIELD_BYTES = 16 * 1024 * 1024


def clean(value: str | None) -> str | None:
    return text_rules.clean_text(value, squash_space=True)


def uk_date(value: str | None):
    """'03/06/2024' or '03/06/2024.' → 2024-06-03 (day first); anything else None."""
    text = (value or "").strip().rstrip(".").strip()
    return parse_date(text, day_first=True) if text else None


def open_rows(path, header_charset: str | None):
    """(handle, csv.DictReader) over the file in the encoding it really has, and a note when
    bytes were read as Windows-1252."""
    declared, actual = file_encoding(path, header=header_charset)
    note = None
    if actual == LEGACY_BYTES:
        encoding, errors = "utf-8-sig", LEGACY_BYTES
        note = "RecallsFile.csv is not UTF-8 throughout: non-UTF-8 bytes read as Windows-1252"
    else:
        encoding, errors = (actual or declared or "utf-8-sig"), "strict"
        if encoding == "utf-8":
            encoding = "utf-8-sig"
    csv.field_size_limit(max(csv.field_size_limit(), MAX_FIELD_BYTES))
    handle = io.open(path, "r", encoding=encoding, errors=errors, newline="")
    return handle, csv.DictReader(handle), note


class UkDvsaCrawler(BaseCrawler):
    """DVSA vehicle recalls: the RecallsFile.csv, grouped by recall number."""

    source = "uk"
    country = "GB"
    source_lang = "en"
    record_type = "vehicle_recall"
    endpoints = {"data": "https://www.check-vehicle-recalls.service.gov.uk"}
    # The file is the whole history: an incremental run looks back over all of it.
    min_overlap_days = 200 * 366

    def fetch(self, ctx) -> Iterator[dict]:
        url = ctx.url("data", FILE_PATH)
        with ctx.http.download_to_file(url) as download:
            handle, reader, note = open_rows(download.path, download.response.charset_encoding)
            with handle:
                header = [name.strip() for name in (reader.fieldnames or [])]
                missing = [name for name in REQUIRED if name not in header]
                if missing:
                    raise UnexpectedContent(f"RecallsFile.csv lacks {', '.join(missing)} (header {header[:14]!r}): "
                                            "not the recalls file", url=url, response_sha256=download.sha256)
                reader.fieldnames = header
                if note:
                    ctx.warn(note)
                recalls: dict[str | None, list[dict]] = {}
                rows = 0
                for line, row in enumerate(reader, start=2):
                    rows += 1
                    row = {key: value for key, value in row.items() if key is not None}
                    row["line"] = line
                    number = clean(row.get(NUMBER))
                    # Rows without a number cannot be grouped: each is its own (dead-lettered) item.
                    recalls.setdefault(number if number else f"\x00{line}", []).append(row)
        log.info("uk: %d rows, %d recalls in the file", rows, len(recalls))
        for number, group in recalls.items():
            yield {"recall_number": None if number.startswith("\x00") else number, "rows": group,
                   "file_url": ctx.public_url(url)}

    def parse(self, ctx, raw: dict) -> dict:
        number = raw.get("recall_number") if isinstance(raw, dict) else None
        rows = raw.get("rows") if isinstance(raw, dict) else None
        if not number or not rows:
            line = rows[0].get("line") if rows else "?"
            raise ValueError(f"CSV row {line} has no {NUMBER}: it cannot be stored without a key")

        def first(column: str) -> str | None:
            return next((value for value in (clean(row.get(column)) for row in rows) if value), None)

        launch_text = first("Launch Date")
        launch = uk_date(launch_text)
        vehicles, models = [], []
        for row in rows:
            vehicle = {"make": clean(row.get("Make")), "model": clean(row.get("Model")),
                       "vin_start": clean(row.get("VIN Start")), "vin_end": clean(row.get("VIN End")),
                       "build_start": _iso_or_text(row.get("Build Start")),
                       "build_end": _iso_or_text(row.get("Build End"))}
            vehicle = {key: value for key, value in vehicle.items() if value}
            if vehicle and vehicle not in vehicles:
                vehicles.append(vehicle)
            models.append(vehicle.get("model"))
        reported = list(dict.fromkeys(value for value in (clean(row.get("Vehicle Numbers")) for row in rows) if value))
        counts = [units for units in map(parse_units, reported) if units is not None]
        extra = {
            "manufacturer_ref": first("Manufacturer Ref"),
            "model_information": first("Recalls Model Information"),
            "vehicles": vehicles,
        }
        if len(reported) > 1:
            extra["units_reported"] = reported
        if reported and not counts:
            extra["units_published"] = reported[0]
        if launch is None and launch_text:
            extra["launch_date_published"] = launch_text
        return {
            "recall_number": number,
            "recall_date": launch,
            "manufacturer_original": distinct_joined(clean(row.get("Make")) for row in rows),
            "model_original": distinct_joined(models),
            "summary_original": first("Concern"),
            "defect_cause_original": first("Defect"),
            "remedy_original": first("Remedy"),
            "affected_units": max(counts) if counts else None,
            "source_url": raw.get("file_url"),
            "extra": {key: value for key, value in extra.items() if value},
        }


def _iso_or_text(value: str | None) -> str | None:
    text = clean(value)
    if not text:
        return None
    date = uk_date(text)
    return date.isoformat() if date else text
