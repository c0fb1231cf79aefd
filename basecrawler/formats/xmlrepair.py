"""The list repair of `xmlsafe` (a bare `&` escaped, control characters XML forbids removed) for
documents too large to hold: a file-like reader that repairs while it streams, for iterparse.

    repairs = count_repairs(path, "utf-8")              # one streaming pass, nothing kept
    if repairs: source = RepairingXmlReader(path, "utf-8")   # then parse through the repair

Memory stays bounded: the reader holds one chunk plus the unfinished tail of a tag. It never
touches the inside of a CDATA section (a bare `&` is legal there: Safety Gate reports put
`&nbsp;` and `Tom & Jerry` inside CDATA), only what is outside it; control characters go
everywhere, since XML forbids them in CDATA too.
"""
from __future__ import annotations

import re
from pathlib import Path

from basecrawler.formats.textcodec import set_xml_declaration
from basecrawler.formats.xmlsafe import BARE_AMP, XML_FORBIDDEN_CONTROL

_CDATA_OPEN, _CDATA_CLOSE = "<![CDATA[", "]]>"
# Text without any `<` is held at most this long before it is repaired and passed on (a huge
# text node): an entity is never longer than this, so cutting before the last `&` is exact.
_HOLD_LIMIT = 1 << 20


class RepairingXmlReader:
    """A file-like object over an XML file read in `encoding`, yielding UTF-8 (declaration
    rewritten) with bare `&` escaped outside CDATA and forbidden control characters removed.
    `amps` and `controls` count what was repaired so far."""

    def __init__(self, path: str | Path, encoding: str = "utf-8", *, errors: str = "strict", chunk: int = 1 << 16):
        self._handle = open(path, "r", encoding=encoding, errors=errors, newline="")
        self._chunk = chunk
        self._pending = ""        # text read but not yet repaired (a tag or CDATA that may go on)
        self._out = b""
        self._in_cdata = False
        self._first = True
        self._eof = False
        self.amps = self.controls = 0

    @property
    def repairs(self) -> int:
        return self.amps + self.controls

    def notes(self) -> list[str]:
        notes = []
        if self.controls:
            notes.append(f"removed {self.controls} control character(s) XML does not allow")
        if self.amps:
            notes.append(f"escaped {self.amps} bare '&'")
        return notes

    def read(self, size: int = -1) -> bytes:
        while (size < 0 or len(self._out) < size) and not (self._eof and not self._pending):
            self._fill()
        if size < 0:
            out, self._out = self._out, b""
        else:
            out, self._out = self._out[:size], self._out[size:]
        return out

    def _fill(self) -> None:
        text = self._handle.read(self._chunk)
        if not text:
            self._eof = True
        elif self._first:
            self._first = False
            text = set_xml_declaration(text)
        text, removed = XML_FORBIDDEN_CONTROL.subn("", text)
        self.controls += removed
        self._pending += text
        self._out += self._drain().encode("utf-8")

    def _drain(self) -> str:
        """Repair and return what is decided; keep in `_pending` what the next chunk may change."""
        done, text = [], self._pending
        while text:
            if self._in_cdata:
                end = text.find(_CDATA_CLOSE)
                if end < 0:
                    keep = 0 if self._eof else len(_CDATA_CLOSE) - 1   # "]]" may close in the next chunk
                    done.append(text[:len(text) - keep])
                    text = text[len(text) - keep:]
                    break
                done.append(text[:end + len(_CDATA_CLOSE)])
                text, self._in_cdata = text[end + len(_CDATA_CLOSE):], False
                continue
            start = text.find(_CDATA_OPEN)
            if start >= 0:
                done.append(self._escape(text[:start]) + _CDATA_OPEN)
                text, self._in_cdata = text[start + len(_CDATA_OPEN):], True
                continue
            if self._eof:
                cut = len(text)
            else:
                # Up to the last `<`: no entity spans a `<`, and a CDATA opening starts with one.
                cut = text.rfind("<")
                if cut <= 0 and len(text) > _HOLD_LIMIT:
                    amp = text.rfind("&", len(text) - 64)
                    cut = amp if amp > 0 else len(text)
                cut = max(cut, 0)
            done.append(self._escape(text[:cut]))
            text = text[cut:]
            break
        self._pending = text
        return "".join(done)

    def _escape(self, text: str) -> str:
        text, amps = BARE_AMP.subn("&amp;", text)
        self.amps += amps
        return text

    def close(self) -> None:
        self._handle.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def count_repairs(path: str | Path, encoding: str = "utf-8", *, errors: str = "strict") -> RepairingXmlReader:
    """Stream the whole file through the repair without keeping it; the reader's counts say
    whether the document needs the repair at all (most never do)."""
    with RepairingXmlReader(path, encoding, errors=errors) as reader:
        while reader.read(1 << 16):
            pass
    return reader


# One markup token: comment, CDATA, processing instruction, declaration, end tag, empty-element
# tag, start tag (attribute values in quotes may hold `>`).
_TOKEN = re.compile(rb"<!--.*?-->|<!\[CDATA\[.*?\]\]>|<\?.*?\?>|<![^>]*>|</[^>]*>"
                    rb"|<(?:[^>\"']|\"[^\"]*\"|'[^']*')*>", re.S)


def flatten_deep(body: bytes, max_depth: int = 200) -> tuple[bytes, int]:
    """`body` (an XML document in an ASCII-compatible encoding) with every tag nested deeper
    than `max_depth` written as text (`&lt;b&gt;`), so libxml2 (which stops at 256 levels)
    reads the document whole and the over-deep markup ends as text inside the element at the
    limit, where a text field's cleaning drops it. Returns the body and how many tags were
    flattened. For a document that already failed on its depth: one regex pass, in memory."""
    depth, flattened, out, last = 0, 0, [], 0
    for match in _TOKEN.finditer(body):
        token = match.group()
        if token.startswith((b"<!", b"<?")):
            continue
        closing, empty = token.startswith(b"</"), token.endswith(b"/>")
        if closing:
            depth -= 1
            deep = depth >= max_depth
        else:
            deep = depth >= max_depth
            if not empty:
                depth += 1
        if deep:
            flattened += 1
            out.append(body[last:match.start()])
            out.append(token.replace(b"&", b"&amp;").replace(b"<", b"&lt;").replace(b">", b"&gt;"))
            last = match.end()
    out.append(body[last:])
    return b"".join(out), flattened


__all__ = ["RepairingXmlReader", "count_repairs", "flatten_deep"]
