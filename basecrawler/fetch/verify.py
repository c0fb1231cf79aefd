"""What a complete document is: the checks a downloaded file passes before it is `complete`
(size against what the server declared, magic bytes, the PDF trailer, an optional checksum),
and the `Artifact` handed back for one. Pure functions over a file and a response's headers."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import httpx

STATES = ("missing", "empty", "partial", "oversized", "corrupt", "complete", "drift_suspect")
PDF_MAGIC = b"%PDF"
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
CONTENT_RANGE_RE = re.compile(r"^bytes\s+(\d+)-(\d+)/(\d+|\*)$")


@dataclass
class Artifact:
    """A verified, complete document on disk."""

    target_key: str
    url: str
    path: Path
    sha256: str
    size: int
    drifted: bool = False          # the server's copy changed since the last complete download

    def read_bytes(self) -> bytes:
        return self.path.read_bytes()


def verify(path: Path, *, magic: bytes | None = PDF_MAGIC, expected_size: int | None = None,
           expected_sha256: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[str, str | None]:
    """(state, reason) of a downloaded file: complete only when every check passes."""
    size = path.stat().st_size if path.exists() else 0
    if not path.exists():
        return "missing", "no file"
    if size == 0:
        return "empty", "0 bytes"
    if size > max_bytes:
        return "oversized", f"{size} bytes exceeds the {max_bytes}-byte limit"
    if expected_size is not None and size < expected_size:
        return "partial", f"{size} of {expected_size} bytes"
    if expected_size is not None and size > expected_size:
        return "oversized", f"{size} bytes but Content-Length said {expected_size}"
    with open(path, "rb") as handle:
        head = handle.read(1024)
        handle.seek(max(0, size - 2048))
        tail = handle.read()
    if magic and not head.lstrip()[: len(magic)] == magic:
        kind = "an HTML page" if b"<html" in head.lower() or b"<!doctype" in head.lower() else "not the expected type"
        return "corrupt", f"magic bytes {head[:8]!r}: {kind}"
    if magic == PDF_MAGIC and b"%%EOF" not in tail:
        return "corrupt", "PDF has no %%EOF trailer (cut off)"
    if expected_sha256 and sha256_of(path) != expected_sha256:
        return "corrupt", "checksum mismatch"
    return "complete", None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def declared_total(response: httpx.Response) -> int | None:
    """Full size of the document the response belongs to (Content-Range total or Content-Length)."""
    match = CONTENT_RANGE_RE.match(response.headers.get("content-range", "").strip())
    if response.status_code == 206 and match and match[3] != "*":
        return int(match[3])
    length = response.headers.get("content-length")
    if response.status_code == 200 and length and length.isdigit() and not response.headers.get("content-encoding"):
        return int(length)
    return None


__all__ = ["Artifact", "STATES", "PDF_MAGIC", "DEFAULT_MAX_BYTES", "CONTENT_RANGE_RE", "verify", "sha256_of", "declared_total"]
