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

Requests go through the run's `HttpClient` policy; the exchange itself (Range, resume,
segments) is basecrawler.fetch.ranged.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
from pathlib import Path
from typing import Callable

from basecrawler.formats.dates import utc_now_iso
from basecrawler.store.engines.dialect import dialect_of
from basecrawler.fetch.ranged import ArtifactError, Received, discard, exchange
from basecrawler.fetch.verify import DEFAULT_MAX_BYTES, PDF_MAGIC, STATES, Artifact, sha256_of, verify

log = logging.getLogger(__name__)


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
        d = dialect_of(self.store)
        rows = self.store.query(d.query(f"SELECT * FROM artifacts WHERE target_key = {d.p}"), [target_key])
        return rows[0] if rows else None

    def save(self, target_key: str, **fields) -> dict:
        """Record `fields` in the target's manifest row (created when absent); the row saved."""
        row = self.manifest(target_key) or {"target_key": target_key, "source": self.source, "attempts": 0}
        row.update(fields)
        row["updated_at"] = utc_now_iso()
        # Portable upsert (SQLite and PostgreSQL): the columns given replace the stored ones.
        names = list(row)
        d = dialect_of(self.store)
        sql = d.write(f"INSERT INTO artifacts ({', '.join(names)}) VALUES ({d.params(len(names))}) "
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
                row = self.save(target_key, state="missing", error="stored copy missing or altered")
            elif not revalidate:
                return stored
            else:
                return self._revalidate(row, stored, url, rediscover, expected_sha256)
        if row is None:
            row = self.save(target_key, url=url, state="missing")
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
            received = exchange(self, key, url, conditional=row)
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
                discard(received.path)
                change = f"body now {state} ({reason})"
        else:
            received, change = None, "URL"
        log.warning("artifact %s: drift suspected (%s changed); re-discovering", key, change)
        self.save(key, state="drift_suspect", error=f"drift: {change} changed")
        new_url = rediscover() if rediscover else url
        if received is not None and new_url == url and change in ("checksum", "validators"):
            return self._complete(key, url, received, drifted=True)
        if received is not None:
            discard(received.path)
        artifact = self._download(key, new_url, expected_sha256=expected_sha256)
        artifact.drifted = True
        return artifact

    def _download(self, key: str, url: str, *, expected_sha256: str | None) -> Artifact:
        state, reason = "missing", None
        for _ in range(self.max_attempts):
            try:
                received = exchange(self, key, url)
            except Exception as exc:
                partial = self.partial_path(key)
                state = "partial" if partial.exists() and partial.stat().st_size else "missing"
                self.save(key, url=url, state=state, error=f"{type(exc).__name__}: {exc}"[:500])
                raise
            state, reason = self._verify(received, expected_sha256)
            if state == "complete":
                return self._complete(key, url, received)
            if state == "partial":
                self._keep_partial(key, received)
            else:
                discard(received.path)
                discard(self.partial_path(key))
            self.save(key, url=url, state=state, error=reason)
            log.warning("artifact %s: %s (%s) from %s; downloading again", key, state, reason, url)
        raise ArtifactError(f"{url}: still {state} after {self.max_attempts} attempts ({reason})",
                            target_key=key, url=url, state=state)

    def _verify(self, received: Received, expected_sha256: str | None) -> tuple[str, str | None]:
        return verify(received.path, magic=self.magic, expected_size=received.total_length,
                      expected_sha256=expected_sha256, max_bytes=self.max_bytes)

    def _complete(self, key: str, url: str, received: Received, *, drifted: bool = False) -> Artifact:
        sha = sha256_of(received.path)
        final = self.path_for(sha)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(received.path, final)
        discard(self.partial_path(key))
        size = final.stat().st_size
        self.save(key, url=url, state="complete", sha256=sha, path=str(final.relative_to(self.root)),
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

    def _keep_partial(self, key: str, received: Received) -> None:
        partial = self.partial_path(key)
        if received.path != partial:
            os.replace(received.path, partial)
        self.save(key, etag=received.etag, last_modified=received.last_modified,
                   content_length=received.total_length)

    def bump_attempts(self, key: str) -> None:
        """Count one more request for the target (each exchange's send, retries included)."""
        row = self.manifest(key) or {}
        self.save(key, attempts=(row.get("attempts") or 0) + 1, last_attempt_at=utc_now_iso())


def sweep_segments(root: Path) -> list[tuple[Path, int]]:
    """Remove the segment files (`partial/seg<pid>-*.seg`) of processes that are gone."""
    from basecrawler.fetch.partials import remove_dead_writers

    return remove_dead_writers((root / "partial").glob("*.seg"), re.compile(r"^seg(\d+)-.*\.seg$"))



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
