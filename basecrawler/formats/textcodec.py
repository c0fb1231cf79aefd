"""One place that decides how a text body is decoded: from what it declares *and* what it
contains. Every source goes through it (`HttpClient.get_text` / `get_json`, the XML list
reader in `xmlsafe`, the EU report stream, the CA cells), so a lying declaration is handled the
same way everywhere.

Rules, in order:
1. A byte-order mark is content, not a claim: it wins.
2. The declarations are tried first: the HTTP charset, then the document's own (XML
   declaration / `<meta charset>`), then the caller's default.
3. A declared legacy charset (Shift_JIS, ISO-8859-1 …) is not believed when the body is valid
   UTF-8 with non-ASCII bytes in it: legacy text is almost never valid UTF-8 by accident, while
   "UTF-8 sent under an old declaration" is a real publishing mistake (the MLIT feed, an EU
   report declared ISO-8859-1 giving `MÃ¼ller`).
4. A body invalid in its declared charset is tried in that charset's superset (Shift_JIS →
   cp932, Latin-1 → cp1252), in the other declarations, then UTF-8 (an undeclared body last in
   cp1252). Nothing decodes with replacement characters silently:
   if no candidate fits, `undecodable` is raised and the caller keeps the body as a dead letter.
5. Text that still carries mojibake (UTF-8 decoded twice upstream) is repaired with ftfy.

Each decision that departs from the declaration is returned in `notes`, for a WARNING.
"""
from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field
from pathlib import Path

import ftfy
import ftfy.badness

from basecrawler.errors import Undecodable

_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
         (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
_XML_DECL = re.compile(rb"^\s*<\?xml[^>]*?encoding\s*=\s*[\"']([A-Za-z0-9._:-]+)[\"']", re.IGNORECASE)
_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?([A-Za-z0-9._:-]+)", re.IGNORECASE)
# The superset each legacy charset is in practice written in.
_SUPERSETS = {"shift_jis": "cp932", "iso8859-1": "cp1252", "ascii": "cp1252", "euc_jp": "euc_jis_2004"}


@dataclass
class Decoded:
    text: str
    encoding: str                     # what was used
    declared: str | None              # what the body / headers said (normalised), if anything
    notes: list[str] = field(default_factory=list)   # departures from the declaration, for a WARNING


def canonical(name: str | None) -> str | None:
    """Python's name for a charset label (`Shift-JIS`, `SJIS`, `x-sjis` → `shift_jis`), or None."""
    if not name:
        return None
    try:
        return codecs.lookup(name.strip().strip("\"'")).name
    except LookupError:
        return None


def declared_in(body: bytes) -> str | None:
    """The charset a document declares about itself (XML declaration, else HTML meta)."""
    head = body[:2048]
    match = _XML_DECL.match(head) or _META_CHARSET.search(head)
    return match.group(1).decode("ascii") if match else None


def _is_utf8(name: str | None) -> bool:
    return name in ("utf-8", "utf-8-sig")


def looks_utf8(body: bytes) -> bool:
    """Valid UTF-8 with at least one multi-byte sequence (pure ASCII proves nothing)."""
    if body.isascii():
        return False
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def decode_text(body: bytes, *, header: str | None = None, default: str | None = None,
                sniff: bool = True, repair: bool = True) -> Decoded:
    """Decode `body` following the module rules. `header` is the HTTP charset, `default` what the
    source documents (e.g. "shift_jis" for the MLIT feed); `sniff` reads the document's own
    declaration too."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            try:
                return Decoded(body[len(bom):].decode(name, errors="strict"), name, name)
            except UnicodeDecodeError as exc:   # a BOM is a promise; broken bytes after it are not text
                raise Undecodable(f"the body starts with a {name} byte-order mark but is not {name}: {exc}") from None
    own = declared_in(body) if sniff else None
    claims = [c for c in (canonical(header), canonical(own), canonical(default)) if c]
    declared = claims[0] if claims else None
    notes: list[str] = []
    if header and own and canonical(header) and canonical(own) and canonical(header) != canonical(own):
        notes.append(f"HTTP says {header}, the document says {own}")
    candidates: list[str] = []
    if declared and not _is_utf8(declared) and looks_utf8(body):
        notes.append(f"declared {declared} but the body is valid UTF-8; read as UTF-8")
        candidates.append("utf-8")
    for claim in claims:
        candidates += [claim, _SUPERSETS.get(claim, claim)]
    # Beyond the claims: UTF-8, and only for an undeclared body the usual Western legacy charset
    # (a body declared UTF-8 that is not is refused rather than guessed into mojibake).
    candidates += ["utf-8"] + (["cp1252"] if declared is None else [])
    for name in dict.fromkeys(candidates):
        try:
            text = body.decode(name)
        except (UnicodeDecodeError, LookupError):
            continue
        if name not in (declared, _SUPERSETS.get(declared)) and not (name == "utf-8" and (declared is None or notes)):
            notes.append(f"body is not valid {declared}; read as {name}" if declared
                         else f"no charset declared and the body is not UTF-8; read as {name}")
        if repair:
            text, repaired = repair_text(text)
            if repaired:
                notes.append("repaired mojibake (text encoded twice)")
        return Decoded(text, name, declared, notes)
    raise Undecodable(f"body is not valid in {', '.join(dict.fromkeys(candidates))}")


# Every alternative of ftfy's mojibake pattern (ftfy.badness.BADNESS_RE, 6.x) matches either
# one of these characters (C1 controls, Œ œ Â Ã, which it judges alone or before ASCII) or two
# non-ASCII characters side by side. Plain French ("Sécurité - fabricant", "véhicule à l'arrêt")
# has neither, and these two searches cost a few per cent of ftfy's ~35-way alternation, which
# would otherwise run over every accented cell of a file. tests/test_textcodec_looks_bad.py
# holds the two to the same answers over texts made of every character the pattern names.
_BAD_ALONE = re.compile("[\x80-\x9f\u0152\u0153\u00c2\u00c3]")
_NON_ASCII_PAIR = re.compile("[^\x00-\x7f][^\x00-\x7f]")


def looks_bad(text: str) -> bool:
    """ftfy's `badness.is_bad(text)` (the text looks like mojibake), answered without ftfy
    for text that cannot match its pattern."""
    if text.isascii() or (_BAD_ALONE.search(text) is None and _NON_ASCII_PAIR.search(text) is None):
        return False
    return ftfy.badness.is_bad(text)


def repair_text(text: str) -> tuple[str, bool]:
    """Undo mojibake that ftfy detects reliably (`MÃ¼ller` → `Müller`); (text, changed)."""
    if not looks_bad(text):
        return text, False
    fixed = ftfy.fix_encoding(text)
    return fixed, fixed != text


def set_xml_declaration(text: str, encoding: str = "UTF-8") -> str:
    """The document with its XML declaration naming `encoding` (lxml honours the declaration
    of bytes it is given, so a re-encoded document must not keep the old one)."""
    stripped = text.lstrip("\ufeff")
    match = re.match(r"\s*<\?xml[^>]*\?>", stripped)
    if match is None:
        return stripped
    decl = re.sub(r"encoding\s*=\s*[\"'][^\"']*[\"']", f'encoding="{encoding}"', match.group(0))
    if "encoding" not in decl:
        decl = decl[:-2].rstrip() + f' encoding="{encoding}"?>'
    return decl + stripped[match.end():]


def xml_bytes(body: bytes, *, header: str | None = None, default: str | None = None) -> tuple[bytes, Decoded]:
    """A whole XML document as UTF-8 bytes with a matching declaration, for lxml."""
    decoded = decode_text(body, header=header, default=default)
    return set_xml_declaration(decoded.text).encode("utf-8"), decoded


# ---- large files (the EU report is streamed from disk) --------------------------------------
LEGACY_BYTES = "basecrawler-cp1252"


def _legacy_bytes(error: UnicodeDecodeError):
    """Decode error handler: bytes that are not UTF-8 inside a UTF-8 text are read as cp1252
    (a Latin-1 name pasted into a UTF-8 report), instead of losing the whole document."""
    return error.object[error.start:error.end].decode("cp1252", errors="replace"), error.end


codecs.register_error(LEGACY_BYTES, _legacy_bytes)


def file_encoding(path: str | Path, *, header: str | None = None, chunk: int = 1 << 20) -> tuple[str | None, str | None]:
    """(declared, actual) charset of a file, read in chunks so memory stays flat. `actual` is
    None when the declaration holds; "utf-8" when a legacy declaration covers a file that is
    valid UTF-8 with non-ASCII bytes; LEGACY_BYTES when a file declared (or defaulting to)
    UTF-8 has bytes that are not UTF-8 (read them as cp1252 with `errors=LEGACY_BYTES`)."""
    with open(path, "rb") as handle:
        head = handle.read(2048)
        declared = canonical(header) or canonical(declared_in(head)) or None
        if head.startswith(codecs.BOM_UTF8) or (declared or "").startswith(("utf-16", "utf-32")):
            return declared, None   # a BOM or a wide encoding: nothing to second-guess
        decoder = codecs.getincrementaldecoder("utf-8")()
        handle.seek(0)
        non_ascii = False
        try:
            while block := handle.read(chunk):
                non_ascii = non_ascii or not block.isascii()
                decoder.decode(block)
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            return declared, (LEGACY_BYTES if declared is None or _is_utf8(declared) else None)
    if declared is None or _is_utf8(declared):
        return declared, None
    return declared, ("utf-8" if non_ascii else None)


class Utf8XmlReader:
    """A file-like object over an XML file read in `encoding`, yielding UTF-8 with the
    declaration rewritten: what iterparse needs when a file lies about its encoding."""

    def __init__(self, path: str | Path, encoding: str, chunk: int = 1 << 16, errors: str = "strict"):
        self._handle = open(path, "r", encoding=encoding, errors=errors, newline="")
        self._chunk = chunk
        self._buffer = b""
        self._first = True

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buffer) < size:
            text = self._handle.read(self._chunk)
            if not text:
                break
            if self._first:
                self._first = False
                text = set_xml_declaration(text)
            self._buffer += text.encode("utf-8")
        if size < 0:
            out, self._buffer = self._buffer, b""
        else:
            out, self._buffer = self._buffer[:size], self._buffer[size:]
        return out

    def close(self) -> None:
        self._handle.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
