"""Raw items and the records made from them, before the store: the provenance wrapper `Raw`,
the date window, and what every record goes through (plausible dates, public links)."""
from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import urlsplit

from .dates import SENTINEL_DATE, is_plausible_date
from .model import Recall

log = logging.getLogger("basecrawler")


@dataclass
class Raw:
    """A raw item with where it came from; sources may yield it instead of bare data so a
    dead letter can point at the URL and the archived response."""

    data: Any
    url: str | None = None
    response_sha256: str | None = None


@dataclass
class Window:
    """The run's date window; either end may be open."""

    since: dt.date | None = None
    until: dt.date | None = None

    def holds(self, date: dt.date | None) -> bool:
        """True for a date inside the window, and for no date at all: an item whose date could
        not be read is never dropped because of it."""
        if date is None:
            return True
        return not (self.since and date < self.since) and not (self.until and date > self.until)


def prepare(record: Recall, *, source: str, today: dt.date, public_url: Callable[[str], str] | None) -> Recall:
    """What every record goes through before the date window and the store: an implausible
    date becomes date-unknown with the raw date kept, and links name the public site
    (`public_url` is None when no endpoint is overridden)."""
    update: dict[str, Any] = {}
    extra = record.extra
    if not record.date_unknown and not is_plausible_date(record.recall_date, today):
        log.warning("%s %s: recall date %s is implausible (before 1900 or after tomorrow); stored as "
                    "date-unknown, raw date kept in extra", source, record.recall_number, record.recall_date)
        extra = {**extra, "implausible_recall_date": record.recall_date.isoformat()}
        update.update(recall_date=SENTINEL_DATE, date_unknown=True)
    if public_url is not None:
        if record.source_url:
            update["source_url"] = public_url(record.source_url)
        extra = _public_links(extra, public_url)
    if extra is not record.extra:
        update["extra"] = extra
    return record.model_copy(update=update) if update else record


def _public_links(value: Any, public_url: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return public_url(value) if "://" in value else value
    if isinstance(value, dict):
        return {key: _public_links(item, public_url) for key, item in value.items()}
    if isinstance(value, list):
        return [_public_links(item, public_url) for item in value]
    return value


def rebase(url: str, bases: list[tuple[str, str]]) -> str:
    """`url` with the first matching (transport origin → public origin) pair swapped."""
    for transport_base, public_base in bases:
        if url.startswith(transport_base) and url[len(transport_base):len(transport_base) + 1] in ("", "/", "?", "#"):
            return public_base + url[len(transport_base):]
    return url


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def as_date(value) -> dt.date | None:
    if value is None or isinstance(value, dt.date):
        return value
    return dt.date.fromisoformat(str(value))


__all__ = ["Raw", "Window", "prepare", "rebase", "origin", "as_date"]
