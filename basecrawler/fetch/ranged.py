"""One download exchange of a document, resumable: a GET under the run's `HttpClient` policy
(host throttle, retries, 429 pauses) whose body lands on disk as a candidate for the manifest
(basecrawler.fetch.artifacts) to verify.

A broken-off body is kept and resumed with `Range` only when the server's validators (ETag /
Last-Modified) are the ones the partial copy came with and the answer is 206 with exactly the
expected Content-Range; a 200 to a Range request replaces the partial copy. A resumable body
(a strong validator, no Content-Encoding) is written straight into the partial copy, its
validators noted in the manifest as soon as the headers arrive; other bodies go to a segment
file named with the writer's pid. The client's public API has no Range/append download, so
`exchange` drives its streaming client inside that policy.

`artifacts` below is the `Artifacts` manifest of the target: this module uses its public
`manifest`, `save`, `bump_attempts`, `partial_path`, `http`, `root` and `max_bytes`.
"""
from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import httpx

from basecrawler.errors import CrawlerError
from basecrawler.fetch.verify import CONTENT_RANGE_RE, declared_total

log = logging.getLogger("basecrawler.fetch.artifacts")   # the downloads' one logger, as before the split


class ArtifactError(CrawlerError):
    """A document could not be brought to the `complete` state; `.state` says why."""

    kind = "artifact"

    def __init__(self, message: str, *, target_key: str, url: str, state: str,
                 response_sha256: str | None = None):
        self.target_key = target_key
        self.url = url
        self.state = state
        self.response_sha256 = response_sha256
        super().__init__(message)



@dataclass
class Received:
    """One HTTP exchange's outcome: a body candidate on disk, or 304."""

    status: int
    path: Path | None
    etag: str | None
    last_modified: str | None
    total_length: int | None


def _resume_headers(artifacts, key: str, url: str) -> tuple[dict, int, dict | None]:
    """Range headers for a partial copy, only when its validators allow a safe resume."""
    partial = artifacts.partial_path(key)
    have = partial.stat().st_size if partial.exists() else 0
    row = artifacts.manifest(key)
    if not have or not row or row.get("url") != url or row.get("state") != "partial":
        discard(partial)
        return {}, 0, None
    validator = row.get("etag") or row.get("last_modified")
    if not validator or (row.get("etag") or "").startswith("W/"):
        discard(partial)  # nothing proves the server still has the same bytes
        return {}, 0, None
    return {"Range": f"bytes={have}-", "If-Range": validator}, have, row


def exchange(artifacts, key: str, url: str, *, conditional: dict | None = None) -> Received:
    """One GET under the client's policy; returns the full body candidate on disk (or 304).
    A body broken off mid-way is kept as the partial copy before the policy retries, and
    each retry asks only for the rest."""
    work = artifacts.root / "partial"
    work.mkdir(parents=True, exist_ok=True)
    partial = artifacts.partial_path(key)

    def send():
        artifacts.bump_attempts(key)
        headers, have, row = ({}, 0, None) if conditional else _resume_headers(artifacts, key, url)
        if conditional:
            if conditional.get("etag"):
                headers["If-None-Match"] = conditional["etag"]
            if conditional.get("last_modified"):
                headers["If-Modified-Since"] = conditional["last_modified"]
        fd, name = tempfile.mkstemp(dir=work, prefix=f"seg{os.getpid()}-", suffix=".seg")
        segment = Path(name)
        try:
            with os.fdopen(fd, "wb") as out, artifacts.http.open_stream(url, headers=headers) as response:
                if response.status_code not in (200, 206):
                    return artifacts.http.read_whole(response), segment, None, 0
                resumed = response.status_code == 206 and _range_fits(response, have, row)
                if response.status_code == 206 and not resumed:
                    response.close()  # not the bytes we asked for: start over without Range
                    discard(partial)
                    raise _RangeRefused(url)
                direct = not conditional and _write_in_place(artifacts, key, url, response, resumed)
                sink = open(partial, "ab" if resumed else "wb") if direct else out
                written = 0
                try:
                    with sink if direct else contextlib.nullcontext():
                        for chunk in artifacts.http.iter_body(response):  # bounded; bytes before a break are kept
                            sink.write(chunk)
                            written += len(chunk)
                            if have + written > artifacts.max_bytes:
                                break
                except httpx.TransportError:
                    out.flush()
                    if not direct:
                        _salvage(artifacts, key, url, response, segment, resumed)
                    raise
            if direct:
                discard(segment)
            return response, (partial if direct else segment), None, written
        except BaseException:
            discard(segment)
            raise

    for _ in range(2):
        try:
            response, segment, _, _ = artifacts.http.with_policy(url, send)
            break
        except _RangeRefused:
            log.warning("artifact %s: server answered the Range request with other bytes; full download", key)
    else:
        raise ArtifactError(f"{url}: Range answers keep mismatching", target_key=key, url=url, state="partial")

    etag, last_modified = response.headers.get("etag"), response.headers.get("last-modified")
    if response.status_code == 304:
        discard(segment)
        return Received(304, None, etag, last_modified, None)
    total = declared_total(response)
    if segment == partial:   # written in place (see `_write_in_place`)
        row = artifacts.manifest(key) or {}
        return Received(response.status_code, partial, etag or row.get("etag"),
                         last_modified or row.get("last_modified"), total)
    if response.status_code == 206:
        with open(partial, "ab") as out, open(segment, "rb") as src:
            while chunk := src.read(1 << 20):
                out.write(chunk)
        segment.unlink()
        row = artifacts.manifest(key) or {}
        return Received(206, partial, etag or row.get("etag"), last_modified or row.get("last_modified"), total)
    discard(partial)  # a 200 is the whole body: the old partial copy must not be prepended
    return Received(200, segment, etag, last_modified, total)


def _write_in_place(artifacts, key: str, url: str, response: httpx.Response, resumed: bool) -> bool:
    """Whether this body goes straight into the partial copy: it can be resumed (a strong
    validator, no Content-Encoding). The manifest learns its validators now, before the
    first byte, so a process killed mid-body leaves a copy the next run resumes."""
    etag = response.headers.get("etag")
    if etag and etag.startswith("W/"):
        etag = None
    encoded = response.headers.get("content-encoding", "identity").strip().lower() not in ("", "identity")
    if encoded or not (etag or response.headers.get("last-modified")):
        return False
    row = artifacts.manifest(key) or {}
    artifacts.save(key, url=url, state="partial", error="download in progress",
               etag=etag or (row.get("etag") if resumed else None),
               last_modified=response.headers.get("last-modified") or (row.get("last_modified") if resumed else None),
               content_length=declared_total(response) or (row.get("content_length") if resumed else None))
    return True


def _range_fits(response: httpx.Response, have: int, row: dict | None) -> bool:
    match = CONTENT_RANGE_RE.match(response.headers.get("content-range", "").strip())
    if not match or row is None or int(match[1]) != have:
        return False
    total = None if match[3] == "*" else int(match[3])
    if row.get("content_length") and total != row["content_length"]:
        return False
    etag = response.headers.get("etag")
    return not (etag and row.get("etag") and etag != row["etag"])


def _salvage(artifacts, key: str, url: str, response: httpx.Response, segment: Path, resumed: bool) -> None:
    """Keep bytes that arrived before the connection broke, when they can be resumed."""
    partial = artifacts.partial_path(key)
    if resumed:
        with open(partial, "ab") as out, open(segment, "rb") as src:
            out.write(src.read())
    elif response.status_code == 200 and segment.stat().st_size:
        os.replace(segment, partial)
    else:
        return
    artifacts.save(key, url=url, state="partial", error="connection broke mid-body",
               etag=response.headers.get("etag") or (artifacts.manifest(key) or {}).get("etag"),
               last_modified=response.headers.get("last-modified") or (artifacts.manifest(key) or {}).get("last_modified"),
               content_length=declared_total(response))
    log.warning("artifact %s: body broke off after %d bytes; will resume", key, partial.stat().st_size)


class _RangeRefused(CrawlerError):
    kind = "range_refused"   # internal: the server ignored Range; never escapes this module


def discard(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
