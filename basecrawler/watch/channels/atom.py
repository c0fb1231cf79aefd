"""The Atom feed (RFC 4287) of a watch, or of everything new: built from the outbox, served
by the web view and written as a file beside the store (`feeds/NAME.atom`)."""
from __future__ import annotations

import os
from pathlib import Path
from xml.etree import ElementTree as ET

from basecrawler.formats.dates import utc_now_iso
from basecrawler.recordtypes.declaration import as_read
from basecrawler.watch import strings

ATOM = "http://www.w3.org/2005/Atom"
FEED_DIR_ENV = "BASECRAWLER_WATCH_FEED_DIR"
ALL = "all"


def _text(parent, tag: str, text: str | None, **attrs) -> ET.Element:
    element = ET.SubElement(parent, f"{{{ATOM}}}{tag}", attrs)
    if text is not None:
        element.text = _clean(text)
    return element


def _clean(text: str) -> str:
    """Characters XML 1.0 cannot hold (control characters a publisher left in) dropped."""
    return "".join(ch for ch in str(text) if ch in "\t\n\r" or ord(ch) >= 0x20 and ch not in "\ufffe\uffff")


def render(name: str | None, rows: list[dict], *, now: str | None = None) -> bytes:
    """The feed document for `rows` (outbox rows, newest first)."""
    ET.register_namespace("", ATOM)
    feed = ET.Element(f"{{{ATOM}}}feed")
    _text(feed, "id", f"urn:basecrawler:watch:{name or ALL}")
    _text(feed, "title", strings.FEED_TITLE.format(name=name) if name else strings.FEED_ALL_TITLE)
    _text(feed, "subtitle", strings.FEED_SUBTITLE)
    _text(feed, "updated", rows[0]["created_at"] if rows else (now or utc_now_iso()))
    author = _text(feed, "author", None)
    _text(author, "name", "basecrawler")
    _text(feed, "generator", "basecrawler")
    for row in rows:
        payload = row["payload"]
        entry = ET.SubElement(feed, f"{{{ATOM}}}entry")
        _text(entry, "id", f"urn:uuid:{row['delivery_id']}")
        title = payload.get("title_ko") or payload.get("title_original") or strings.NO_TITLE
        _text(entry, "title", f"{strings.CHANGE.get(row['change'], row['change'])}: {title}")
        _text(entry, "updated", row.get("sent_at") or row["created_at"])
        if payload.get("url"):
            _text(entry, "link", None, href=str(payload["url"]), rel="alternate")
        _text(entry, "category", None, term=str(payload.get("record_type")), label=str(payload.get("record_title")))
        lines = [f"{strings.SOURCE}: {payload.get('source')}", f"{strings.RECORD_TYPE}: {payload.get('record_title')}"]
        korean, original = as_read(payload.get("title_ko"), payload.get("title_original"),
                                   (payload.get("fields") or {}).get("source_lang"))
        if korean:
            lines.append(f"{strings.KOREAN}: {korean}")
        if original:
            lines.append(f"{strings.ORIGINAL}: {original}")
        _text(entry, "summary", "\n".join(lines), type="text")
    return ET.tostring(feed, encoding="utf-8", xml_declaration=True)


def feed_dir(store) -> Path:
    return Path(os.environ.get(FEED_DIR_ENV) or Path(store.directory) / "feeds")


def write(store, name: str | None, document: bytes) -> Path:
    """Written beside and moved over, so a reader never sees half a feed."""
    folder = feed_dir(store)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name or ALL}.atom"
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(document)
    os.replace(partial, path)
    return path
