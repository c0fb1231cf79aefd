"""The archive's side of an exchange: validators for a conditional request, the stored copy a
304 stands for, and the record of what came. Only the archive's public API; no HTTP sent here."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import httpx

from basecrawler.fetch.archive import Archive


def conditional_headers(archive: Archive | None, url: str, headers: dict) -> dict | None:
    """Add If-None-Match / If-Modified-Since from the last stored answer of `url` to `headers`
    (never over a caller's own); that stored answer, or None."""
    if not archive:
        return None
    cached = archive.validators_for(url)
    if cached:
        if cached.get("etag"):
            headers.setdefault("If-None-Match", cached["etag"])
        if cached.get("last_modified"):
            headers.setdefault("If-Modified-Since", cached["last_modified"])
    return cached


def record(archive: Archive | None, url: str, response: httpx.Response, sha: str | None, size: int | None) -> None:
    """Note one exchange (its validators, the body's sha256) in the archive's index."""
    if archive is None:
        return
    archive.record(
        url=url, method=response.request.method if response.request else "GET", status=response.status_code,
        content_type=response.headers.get("content-type"), etag=response.headers.get("etag"),
        last_modified=response.headers.get("last-modified"), sha256=sha, size=size,
    )


def archive_body(archive: Archive | None, url: str, response: httpx.Response, body: bytes) -> str | None:
    """Keep a body and note the exchange; its sha256 (None: no archive)."""
    if archive is None:
        return None
    sha = archive.put_bytes(body)
    record(archive, url, response, sha, len(body))
    return sha


def stored_response(archive: Archive, cached: dict, request: httpx.Request) -> httpx.Response:
    """The 200 a 304 stands for, its body from the archive (marked `from_archive`)."""
    headers = {"content-type": cached.get("content_type") or "application/octet-stream"}
    if cached.get("etag"):
        headers["etag"] = cached["etag"]
    response = httpx.Response(200, headers=headers, content=archive.get_bytes(cached["sha256"]), request=request)
    response.extensions["from_archive"] = True
    return response


def copy_stored(archive: Archive, cached: dict, directory: Path, prefix: str) -> Path:
    """The stored body a 304 stands for, copied to a new temp file in `directory`."""
    fd, name = tempfile.mkstemp(dir=directory, prefix=prefix, suffix=".part")
    with os.fdopen(fd, "wb") as out, archive.open(cached["sha256"]) as src:
        shutil.copyfileobj(src, out, 1 << 20)
    return Path(name)


__all__ = ["conditional_headers", "record", "archive_body", "stored_response", "copy_stored"]
