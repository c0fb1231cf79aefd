"""Safe XML reading for every source: no entity resolution, no DTD loading, no network, and
any document that declares a DTD is refused outright (XXE and entity-expansion attacks need
one; no real feed or report we read declares one).

    for event, element in iter_xml(path_or_file, events=("end",)): ...; release(element)
    root = parse_bytes(body)
    listed = read_list(body, "item", header=charset)   # a list that may be almost-XML
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import IO, Iterator

from lxml import etree

from basecrawler.errors import ListUnreadable, UnsafeXml
from basecrawler.formats.textcodec import Decoded, Undecodable, set_xml_declaration, decode_text


def _refuse_dtd(tree) -> None:
    docinfo = tree.docinfo
    if docinfo.doctype or docinfo.internalDTD is not None or docinfo.system_url:
        raise UnsafeXml(f"refused: the document declares a DTD ({docinfo.doctype or docinfo.system_url}); "
                        "entities and DTDs are never processed (XXE / entity-expansion protection)")


def safe_parser() -> etree.XMLParser:
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False,
                           remove_comments=True, remove_pis=True)


def parse_bytes(body: bytes) -> etree._Element:
    """Parse a whole (small) document from bytes, honouring its declared encoding; a DTD is
    refused from the bytes first, as for a streamed one (`iter_xml`)."""
    _refuse_dtd_in_prolog(body[:PROLOG_BYTES])
    root = etree.fromstring(body, parser=safe_parser())
    _refuse_dtd(root.getroottree())
    return root


# The prolog (everything before the root element) is where a DTD must be; a document whose
# first PROLOG_BYTES hold no element start is refused by libxml2 on its own terms anyway.
PROLOG_BYTES = 1 << 16
_DOCTYPE_BYTES = re.compile(rb"<!DOCTYPE", re.IGNORECASE)
_ELEMENT_START = re.compile(rb"<[A-Za-z_:]")


def _refuse_dtd_in_prolog(head: bytes) -> bool:
    """Raise UnsafeXml when `head` (the document's first bytes) declares a DTD before its root
    element; True once the root element's start is in `head` (nothing more to look at)."""
    head = head.replace(b"\x00", b"")      # UTF-16 text, read as bytes
    root = _ELEMENT_START.search(head)
    if _DOCTYPE_BYTES.search(head, 0, root.start() if root else len(head)):
        raise UnsafeXml("refused: the document declares a DTD; entities and DTDs are never processed "
                        "(XXE / entity-expansion protection)")
    return root is not None or len(head) >= PROLOG_BYTES


class _PrologGuard:
    """A file-like that refuses a DTD from the bytes themselves, before libxml2 has parsed one:
    how libxml2 reacts to a hostile internal subset (an entity bomb) must not decide whether
    the document is refused as unsafe or as broken."""

    def __init__(self, raw: IO[bytes]):
        self.raw = raw
        self.head: bytes | None = b""

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        if self.head is not None:
            self.head = (self.head + data)[:PROLOG_BYTES]
            if _refuse_dtd_in_prolog(self.head) or not data:
                self.head = None
        return data


def iter_xml(source: str | IO[bytes], events=("start", "end")) -> Iterator[tuple[str, etree._Element]]:
    """`lxml.etree.iterparse` with the same protections, for documents too large to hold;
    raises UnsafeXml before parsing when the document's prolog declares a DTD (and, as a
    second line, at the root element if libxml2 saw one)."""
    if isinstance(source, str):
        with open(source, "rb") as handle:
            _refuse_dtd_in_prolog(handle.read(PROLOG_BYTES))
    else:
        source = _PrologGuard(source)
    context = etree.iterparse(source, events=tuple(dict.fromkeys(("start", *events))), resolve_entities=False,
                              no_network=True, load_dtd=False, huge_tree=False, remove_comments=True,
                              remove_pis=True)
    root_checked = False
    for event, element in context:
        if not root_checked:
            root_checked = True
            _refuse_dtd(element.getroottree())
        if event in events:
            yield event, element


def release(element: etree._Element) -> None:
    """Free a processed element and the siblings before it (keeps iterparse memory flat)."""
    element.clear(keep_tail=False)
    parent = element.getparent()
    if parent is not None:
        while element.getprevious() is not None:
            del parent[0]


# ---- lists that are almost XML ---------------------------------------------------------------
# A feed or index is a list of independent items: one item with a bare `&` (seen in a real
# MLIT feed) or a stray control character must not cost the others. Repairs are textual and
# never add what XML safety forbids: the parser still resolves no entity and loads no DTD.
BARE_AMP = re.compile(r"&(?!(?:[A-Za-z_][\w.-]*|#[0-9]+|#x[0-9A-Fa-f]+);)")
XML_FORBIDDEN_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_DOCTYPE = re.compile(r"<!DOCTYPE", re.IGNORECASE)


@dataclass
class ListRead:
    items: list                                    # parsed item elements, in document order
    root: etree._Element | None                    # the whole document when it parsed
    lost: list[tuple[str, str]] = field(default_factory=list)    # (raw item text, why) for dead letters
    repairs: list[str] = field(default_factory=list)              # what was repaired, for a WARNING
    decoded: Decoded | None = None


def _strict(text: str) -> etree._Element:
    return parse_bytes(set_xml_declaration(text).encode("utf-8"))


def _repair(text: str) -> tuple[str, list[str]]:
    notes = []
    text, controls = XML_FORBIDDEN_CONTROL.subn("", text)
    if controls:
        notes.append(f"removed {controls} control character(s) XML does not allow")
    text, amps = BARE_AMP.subn("&amp;", text)
    if amps:
        notes.append(f"escaped {amps} bare '&'")
    return text, notes


def read_list(body: bytes, item: str, *, header: str | None = None, default: str | None = None) -> ListRead:
    """Every readable `<item>` element (local name, any namespace) of a list document.

    Decodes with `textcodec.decode_text` (declaration and content), parses strictly; if the
    document is not well-formed, repairs bare `&` and forbidden control characters; if it still
    is not, reads item by item (each `<item>…</item>` inside the root's start tag, so namespaces
    hold) and reports each unreadable one in `lost`. Raises UnsafeXml for a DTD, ListUnreadable
    when nothing at all can be read."""
    try:
        decoded = decode_text(body, header=header, default=default)
    except Undecodable as exc:
        raise ListUnreadable(str(exc)) from None
    text = decoded.text
    if _DOCTYPE.search(text):   # anywhere: item-by-item reading must not meet one either
        raise UnsafeXml("refused: the document declares a DTD; entities and DTDs are never processed")
    repairs = list(decoded.notes)

    def items_of(root):
        return [e for e in root.iter() if isinstance(e.tag, str) and etree.QName(e).localname == item]

    try:
        root = _strict(text)
        return ListRead(items_of(root), root, [], repairs, decoded)
    except etree.XMLSyntaxError as exc:
        first_error = str(exc)
    fixed, notes = _repair(text)
    if notes:
        try:
            root = _strict(fixed)
            return ListRead(items_of(root), root, [], repairs + notes, decoded)
        except etree.XMLSyntaxError:
            pass
    # Item by item, inside a copy of the root's start tag.
    start = re.search(r"<([A-Za-z_][\w.:-]*)(\s[^<>]*)?>", re.sub(r"^\s*<\?xml[^>]*\?>", "", fixed))
    chunks = list(re.finditer(rf"<((?:[\w.-]+:)?{re.escape(item)})(?=[\s>/])[^<>]*?(?:/>|>.*?</\1\s*>)", fixed, re.S))
    if start is None or not chunks:
        raise ListUnreadable(f"not well-formed and no <{item}> element could be delimited: {first_error}")
    opening, closing = start.group(0), f"</{start.group(1)}>"
    items, lost = [], []
    for chunk in chunks:
        try:
            wrapper = _strict(opening + chunk.group(0) + closing)
            items.extend(e for e in wrapper if isinstance(e.tag, str))
        except etree.XMLSyntaxError as exc:
            lost.append((chunk.group(0), f"unreadable <{item}> in a list that is not well-formed: {exc}"))
    if not items:
        raise ListUnreadable(f"not well-formed and none of its {len(chunks)} <{item}> elements is readable: {first_error}")
    return ListRead(items, None, lost, repairs + notes + [
        f"not well-formed ({first_error}); read item by item: {len(items)} read, {len(lost)} lost"], decoded)
