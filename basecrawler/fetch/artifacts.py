"""Manifest-driven document downloads: every target (e.g. "the recall list PDF of press page X")
has one row in the `artifacts` table saying where its verified copy lives and what state it is in.

States: missing → (empty | partial | oversized | corrupt)* → complete, and complete →
drift_suspect when the server's copy changed. A body is written to a temp file, verified (size
against Content-Length, magic bytes, PDF trailer, optional checksum) and only then renamed into
place, so a half-written or wrong file is never "complete"; a 0-byte body never is either.

A broken-off body is kept and resumed with `Range` only when the server's validators (ETag /
Last-Modified) are the ones the partial copy came with and the answer is 206 with exactly the
expected Content-Range; a 200 to a Range request replaces the partial copy (no duplicate bytes).
A resumable body (a strong validator, no Content-Encoding) is written straight into the partial
copy, its validators noted in the manifest as soon as the headers arrive, so what a process
killed mid-body (kill -9) received is resumed by the next run; other bodies go to a segment
file named with the writer's pid, which `sweep_segments` removes once that process is gone.
Files are named by hashes (content sha256; partial copies by the target key's hash), never by
URLs, so no URL can steer a path.

Requests go through the run's `HttpClient` policy (host throttle, retries, 429 pauses); the
client's public API has no Range/append download, so `_exchange` drives its streaming client
inside that policy.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import httpx

from basecrawler.formats.dates import utc_now_iso
from basecrawler.errors import CrawlerError
from basecrawler.fetch.verify import (CONTENT_RANGE_RE, DEFAULT_MAX_BYTES, PDF_MAGIC, STATES, Artifact, declared_total,
                                      sha256_of, verify)

log = logging.getLogger(__name__)

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
class _Received:
    """One HTTP exchange's outcome: a body candidate on disk, or 304."""

    status: int
    path: Path | None
    etag: str | None
    last_modified: str | None
    total_length: int | None


class Artifacts:
    """Downloads for one source through one run's HttpClient, recorded in the manifest."""

    def __init__(self, http, store, *, source: str, root: Path | None = None, magic: bytes | None = PDF_MAGIC,
                 suffix: str = ".pdf", max_bytes: int = DEFAULT_MAX_BYTES, max_attempts: int = 3):
        self.http = http
        self.store = store
        self.source = source
        self.root = Path(root) if root else store.directory / "artifacts"
        self.magic = magic
        self.suffix = suffix
        self.max_bytes = max_bytes
        self.max_attempts = max_attempts

    # ---- manifest ---------------------------------------------------------------------
    def manifest(self, target_key: str) -> dict | None:
        rows = self.store.query("SELECT * FROM artifacts WHERE target_key = ?", [target_key])
        return rows[0] if rows else None

    def _save(self, target_key: str, **fields) -> dict:
        row = self.manifest(target_key) or {"target_key": target_key, "source": self.source, "attempts": 0}
        row.update(fields)
        row["updated_at"] = utc_now_iso()
        # Portable upsert (SQLite and PostgreSQL): the columns given replace the stored ones.
        names = list(row)
        sql = (f"INSERT INTO artifacts ({', '.join(names)}) VALUES ({', '.join('?' * len(names))}) "
               f"ON CONFLICT(target_key) DO UPDATE SET "
               + ", ".join(f"{n} = excluded.{n}" for n in names if n != "target_key"))
        self.store.write(lambda db: db.conn.execute(sql, [row[n] for n in names]))
        return row

    def path_for(self, sha256: str) -> Path:
        return self.root / sha256[:2] / f"{sha256}{self.suffix}"

    def partial_path(self, target_key: str) -> Path:
        return self.root / "partial" / (hashlib.sha256(target_key.encode("utf-8")).hexdigest()[:40] + ".part")

    # ---- the one entry point ----------------------------------------------------------
    def ensure(self, target_key: str, url: str, *, rediscover: Callable[[], str] | None = None,
               expected_sha256: str | None = None, revalidate: bool = True) -> Artifact:
        """A complete, verified copy of the target, downloading (or resuming) as needed.

        A complete copy is revalidated with a conditional request; a changed body or validator
        (or a new URL for the same target) marks it `drift_suspect`, and `rediscover()` (e.g.
        re-reading the press page) gives the URL to fetch the current copy from.
        Raises ArtifactError when the document cannot be made complete; the manifest keeps why.
        """
        row = self.manifest(target_key)
        if row and row["state"] == "complete":
            stored = self._stored_copy(row)
            if stored is None:
                log.warning("artifact %s: manifest says complete but the file is gone or altered; fetching again", target_key)
                row = self._save(target_key, state="missing", error="stored copy missing or altered")
            elif not revalidate:
                return stored
            else:
                return self._revalidate(row, stored, url, rediscover, expected_sha256)
        if row is None:
            row = self._save(target_key, url=url, state="missing")
        return self._download(target_key, url, expected_sha256=expected_sha256)

    # ---- internals --------------------------------------------------------------------
    def _stored_copy(self, row: dict) -> Artifact | None:
        path = self.root / row["path"] if row.get("path") else None
        if path is None or not path.exists() or sha256_of(path) != row.get("sha256"):
            return None
        return Artifact(row["target_key"], row["url"], path, row["sha256"], path.stat().st_size)

    def _revalidate(self, row, stored: Artifact, url, rediscover, expected_sha256) -> Artifact:
        key = row["target_key"]
        if url == row["url"]:
            received = self._exchange(key, url, conditional=row)
            if received.status == 304:
                return stored
            state, reason = self._verify(received, expected_sha256)
            if state == "complete":
                sha = sha256_of(received.path)
                same_validators = (received.etag, received.last_modified) == (row.get("etag"), row.get("last_modified"))
                if sha == row["sha256"] and same_validators:
                    received.path.unlink()
                    return stored
                change = "checksum" if sha != row["sha256"] else "validators"
            else:
                _discard(received.path)
                change = f"body now {state} ({reason})"
        else:
            received, change = None, "URL"
        log.warning("artifact %s: drift suspected (%s changed); re-discovering", key, change)
        self._save(key, state="drift_suspect", error=f"drift: {change} changed")
        new_url = rediscover() if rediscover else url
        if received is not None and new_url == url and change in ("checksum", "validators"):
            return self._complete(key, url, received, drifted=True)
        if received is not None:
            _discard(received.path)
        artifact = self._download(key, new_url, expected_sha256=expected_sha256)
        artifact.drifted = True
        return artifact

    def _download(self, key: str, url: str, *, expected_sha256: str | None) -> Artifact:
        state, reason = "missing", None
        for _ in range(self.max_attempts):
            try:
                received = self._exchange(key, url)
            except Exception as exc:
                partial = self.partial_path(key)
                state = "partial" if partial.exists() and partial.stat().st_size else "missing"
                self._save(key, url=url, state=state, error=f"{type(exc).__name__}: {exc}"[:500])
                raise
            state, reason = self._verify(received, expected_sha256)
            if state == "complete":
                return self._complete(key, url, received)
            if state == "partial":
                self._keep_partial(key, received)
            else:
                _discard(received.path)
                _discard(self.partial_path(key))
            self._save(key, url=url, state=state, error=reason)
            log.warning("artifact %s: %s (%s) from %s; downloading again", key, state, reason, url)
        raise ArtifactError(f"{url}: still {state} after {self.max_attempts} attempts ({reason})",
                            target_key=key, url=url, state=state)

    def _verify(self, received: _Received, expected_sha256: str | None) -> tuple[str, str | None]:
        return verify(received.path, magic=self.magic, expected_size=received.total_length,
                      expected_sha256=expected_sha256, max_bytes=self.max_bytes)

    def _complete(self, key: str, url: str, received: _Received, *, drifted: bool = False) -> Artifact:
        sha = sha256_of(received.path)
        final = self.path_for(sha)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(received.path, final)
        _discard(self.partial_path(key))
        size = final.stat().st_size
        self._save(key, url=url, state="complete", sha256=sha, path=str(final.relative_to(self.root)),
                   content_length=size, etag=received.etag, last_modified=received.last_modified,
                   error=None)
        archive = getattr(self.http, "archive", None)
        if archive is not None:
            # Also in the raw archive, so a dead letter's response_sha256 resolves to this body.
            archive.put_file(final, sha)
            archive.record(url=url, method="GET", status=200, content_type="application/pdf" if self.magic == PDF_MAGIC else None,
                           etag=received.etag, last_modified=received.last_modified, sha256=sha, size=size)
        log.info("artifact %s: complete (%d bytes, sha256 %s)", key, size, sha[:12])
        return Artifact(key, url, final, sha, size, drifted=drifted)

    def _keep_partial(self, key: str, received: _Received) -> None:
        partial = self.partial_path(key)
        if received.path != partial:
            os.replace(received.path, partial)
        self._save(key, etag=received.etag, last_modified=received.last_modified,
                   content_length=received.total_length)

    def _resume_headers(self, key: str, url: str) -> tuple[dict, int, dict | None]:
        """Range headers for a partial copy, only when its validators allow a safe resume."""
        partial = self.partial_path(key)
        have = partial.stat().st_size if partial.exists() else 0
        row = self.manifest(key)
        if not have or not row or row.get("url") != url or row.get("state") != "partial":
            _discard(partial)
            return {}, 0, None
        validator = row.get("etag") or row.get("last_modified")
        if not validator or (row.get("etag") or "").startswith("W/"):
            _discard(partial)  # nothing proves the server still has the same bytes
            return {}, 0, None
        return {"Range": f"bytes={have}-", "If-Range": validator}, have, row

    def _exchange(self, key: str, url: str, *, conditional: dict | None = None) -> _Received:
        """One GET under the client's policy; returns the full body candidate on disk (or 304).
        A body broken off mid-way is kept as the partial copy before the policy retries, and
        each retry asks only for the rest."""
        work = self.root / "partial"
        work.mkdir(parents=True, exist_ok=True)
        partial = self.partial_path(key)

        def send():
            self._bump_attempts(key)
            headers, have, row = ({}, 0, None) if conditional else self._resume_headers(key, url)
            if conditional:
                if conditional.get("etag"):
                    headers["If-None-Match"] = conditional["etag"]
                if conditional.get("last_modified"):
                    headers["If-Modified-Since"] = conditional["last_modified"]
            fd, name = tempfile.mkstemp(dir=work, prefix=f"seg{os.getpid()}-", suffix=".seg")
            segment = Path(name)
            try:
                with os.fdopen(fd, "wb") as out, self.http.open_stream(url, headers=headers) as response:
                    if response.status_code not in (200, 206):
                        return self.http.read_whole(response), segment, None, 0
                    resumed = response.status_code == 206 and self._range_fits(response, have, row)
                    if response.status_code == 206 and not resumed:
                        response.close()  # not the bytes we asked for: start over without Range
                        _discard(partial)
                        raise _RangeRefused(url)
                    direct = not conditional and self._write_in_place(key, url, response, resumed)
                    sink = open(partial, "ab" if resumed else "wb") if direct else out
                    written = 0
                    try:
                        with sink if direct else contextlib.nullcontext():
                            for chunk in self.http.iter_body(response):  # bounded; bytes before a break are kept
                                sink.write(chunk)
                                written += len(chunk)
                                if have + written > self.max_bytes:
                                    break
                    except httpx.TransportError:
                        out.flush()
                        if not direct:
                            self._salvage(key, url, response, segment, resumed)
                        raise
                if direct:
                    _discard(segment)
                return response, (partial if direct else segment), None, written
            except BaseException:
                _discard(segment)
                raise

        for _ in range(2):
            try:
                response, segment, _, _ = self.http.with_policy(url, send)
                break
            except _RangeRefused:
                log.warning("artifact %s: server answered the Range request with other bytes; full download", key)
        else:
            raise ArtifactError(f"{url}: Range answers keep mismatching", target_key=key, url=url, state="partial")

        etag, last_modified = response.headers.get("etag"), response.headers.get("last-modified")
        if response.status_code == 304:
            _discard(segment)
            return _Received(304, None, etag, last_modified, None)
        total = declared_total(response)
        if segment == partial:   # written in place (see `_write_in_place`)
            row = self.manifest(key) or {}
            return _Received(response.status_code, partial, etag or row.get("etag"),
                             last_modified or row.get("last_modified"), total)
        if response.status_code == 206:
            with open(partial, "ab") as out, open(segment, "rb") as src:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
            segment.unlink()
            row = self.manifest(key) or {}
            return _Received(206, partial, etag or row.get("etag"), last_modified or row.get("last_modified"), total)
        _discard(partial)  # a 200 is the whole body: the old partial copy must not be prepended
        return _Received(200, segment, etag, last_modified, total)

    def _write_in_place(self, key: str, url: str, response: httpx.Response, resumed: bool) -> bool:
        """Whether this body goes straight into the partial copy: it can be resumed (a strong
        validator, no Content-Encoding). The manifest learns its validators now, before the
        first byte, so a process killed mid-body leaves a copy the next run resumes."""
        etag = response.headers.get("etag")
        if etag and etag.startswith("W/"):
            etag = None
        encoded = response.headers.get("content-encoding", "identity").strip().lower() not in ("", "identity")
        if encoded or not (etag or response.headers.get("last-modified")):
            return False
        row = self.manifest(key) or {}
        self._save(key, url=url, state="partial", error="download in progress",
                   etag=etag or (row.get("etag") if resumed else None),
                   last_modified=response.headers.get("last-modified") or (row.get("last_modified") if resumed else None),
                   content_length=declared_total(response) or (row.get("content_length") if resumed else None))
        return True

    def _range_fits(self, response: httpx.Response, have: int, row: dict | None) -> bool:
        match = CONTENT_RANGE_RE.match(response.headers.get("content-range", "").strip())
        if not match or row is None or int(match[1]) != have:
            return False
        total = None if match[3] == "*" else int(match[3])
        if row.get("content_length") and total != row["content_length"]:
            return False
        etag = response.headers.get("etag")
        return not (etag and row.get("etag") and etag != row["etag"])

    def _salvage(self, key: str, url: str, response: httpx.Response, segment: Path, resumed: bool) -> None:
        """Keep bytes that arrived before the connection broke, when they can be resumed."""
        partial = self.partial_path(key)
        if resumed:
            with open(partial, "ab") as out, open(segment, "rb") as src:
                out.write(src.read())
        elif response.status_code == 200 and segment.stat().st_size:
            os.replace(segment, partial)
        else:
            return
        self._save(key, url=url, state="partial", error="connection broke mid-body",
                   etag=response.headers.get("etag") or (self.manifest(key) or {}).get("etag"),
                   last_modified=response.headers.get("last-modified") or (self.manifest(key) or {}).get("last_modified"),
                   content_length=declared_total(response))
        log.warning("artifact %s: body broke off after %d bytes; will resume", key, partial.stat().st_size)

    def _bump_attempts(self, key: str) -> None:
        row = self.manifest(key) or {}
        self._save(key, attempts=(row.get("attempts") or 0) + 1, last_attempt_at=utc_now_iso())


def sweep_segments(root: Path) -> list[tuple[Path, int]]:
    """Remove the segment files (`partial/seg<pid>-*.seg`) of processes that are gone."""
    from basecrawler.fetch.partials import remove_dead_writers

    return remove_dead_writers((root / "partial").glob("*.seg"), re.compile(r"^seg(\d+)-.*\.seg$"))


class _RangeRefused(CrawlerError):
    kind = "range_refused"   # internal: the server ignored Range; never escapes this module


def _discard(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


class Documents:
    """What a source sees of downloaded documents (`self.documents`): `get()` a verified local
    copy through the manifest, `stored()` the bytes of one kept earlier (a dead-letter retry
    re-reads the PDF it came from without fetching). The HTTP client is asked for only when a
    download is needed, so reading stored copies opens no connection."""

    def __init__(self, http: Callable[[], object], store, *, source: str):
        self._http = http
        self._store = store
        self._source = source

    def get(self, url: str, *, target: str | None = None, rediscover: Callable[[], str] | None = None) -> Artifact:
        """A complete, verified copy of the document (`.path` on disk, `.sha256`, `.url`,
        `.drifted`); `target` names it across URL changes (default: the URL). Raises
        ArtifactError or FetchError when it cannot be had."""
        artifacts = Artifacts(self._http(), self._store, source=self._source)
        return artifacts.ensure(target or url, url, rediscover=rediscover)

    def stored(self, sha256: str) -> bytes:
        """A document's bytes by content hash: the artifact copy, else the raw archive's."""
        path = Artifacts(None, self._store, source=self._source).path_for(sha256)
        if path.exists():
            return path.read_bytes()
        from basecrawler.fetch.archive import Archive

        return Archive(self._store).get_bytes(sha256)


__all__ = ["Artifacts", "Artifact", "ArtifactError", "Documents", "STATES", "verify", "sha256_of", "PDF_MAGIC"]
