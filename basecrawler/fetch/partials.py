"""Partial downloads: their names, their sweeping after a crash, and their resumption.

A body is streamed to `<dir>/dl-<pid>-<key>-XXXX.part` (key: a hash of the URL). When the
response can be resumed later — no Content-Encoding (Range counts the bytes on the wire) and
a validator for If-Range (a strong ETag or Last-Modified) — a `.json` sidecar next to it keeps
the URL, the validators and the full length, written as soon as the headers arrive.

- A process killed mid-download (kill -9, OOM) leaves both behind. The next run's sweep turns
  a dead process's resumable copy into `resume-<key>.part` (+ `.json`); everything else of a
  dead process is removed, and so is a resumable copy nobody claimed within RESUMABLE_AGE_S.
- A download stopped on request (SIGTERM) parks its copy the same way.
- The next download of that URL claims the copy (an atomic rename: one process wins) and asks
  for the rest with `Range` + `If-Range`. The answer is appended only when it is a 206 whose
  Content-Range starts where the copy ends, with the same total and ETag; a 200 (the document
  changed, or the server ignores Range) replaces the copy, so no byte is ever duplicated.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from basecrawler.errors import CrawlerError

log = logging.getLogger(__name__)

_PARTIAL_RE = re.compile(r"^dl-(\d+)-(?:([0-9a-f]{24})-)?.*\.part$")
_RESUME_RE = re.compile(r"^resume-([0-9a-f]{24})\.part$")
_CONTENT_RANGE_RE = re.compile(r"^bytes\s+(\d+)-(\d+)/(\d+|\*)$")
# A `.part` without a pid (written before the pid was in the name) is removed once it is old.
LEGACY_PARTIAL_AGE_S = 3600
# A resumable copy nobody came back for within a day is removed: the document has likely moved on.
RESUMABLE_AGE_S = 24 * 3600


class RangeMismatch(CrawlerError):
    """A 206 that does not continue the partial copy: the download starts over without Range."""

    kind = "range_mismatch"


def url_key(url: str) -> str:
    return hashlib.sha256(url.encode("utf-8")).hexdigest()[:24]


def partial_prefix(url: str | None = None) -> str:
    return f"dl-{os.getpid()}-" + (f"{url_key(url)}-" if url else "")


def sidecar(path: Path) -> Path:
    return path.with_suffix(".json")


def _identity(response) -> bool:
    return response.headers.get("content-encoding", "identity").strip().lower() in ("", "identity")


@dataclass
class Resumable:
    """A claimed partial copy: `size` bytes on disk, and what the server said about them."""

    size: int
    etag: str | None
    last_modified: str | None
    length: int | None

    def headers(self) -> dict:
        return {"Range": f"bytes={self.size}-", "If-Range": self.etag or self.last_modified}

    def continued_by(self, response) -> bool:
        match = _CONTENT_RANGE_RE.match(response.headers.get("content-range", "").strip())
        if response.status_code != 206 or not match or int(match[1]) != self.size or not _identity(response):
            return False
        total = None if match[3] == "*" else int(match[3])
        if self.length is not None and total != self.length:
            return False
        etag = response.headers.get("etag")
        return not (etag and self.etag and etag != self.etag)


def note_resumable(path: Path, url: str, response) -> bool:
    """Write the sidecar when this response's body could be resumed; True when written."""
    etag = response.headers.get("etag")
    if etag and etag.startswith("W/"):
        etag = None   # a weak ETag does not promise the same bytes
    last_modified = response.headers.get("last-modified")
    if not _identity(response) or not (etag or last_modified):
        return False
    length = None
    match = _CONTENT_RANGE_RE.match(response.headers.get("content-range", "").strip())
    if response.status_code == 206 and match and match[3] != "*":
        length = int(match[3])
    elif response.status_code == 200 and response.headers.get("content-length", "").isdigit():
        length = int(response.headers["content-length"])
    sidecar(path).write_text(json.dumps({"url": url, "etag": etag, "last_modified": last_modified, "length": length}))
    return True


def claim(directory: Path, url: str, target: Path) -> Resumable | None:
    """Take over the parked copy of `url` as `target` (replacing it); None when there is none."""
    parked = directory / f"resume-{url_key(url)}.part"
    try:
        os.replace(parked, target)
    except FileNotFoundError:
        return None
    meta = sidecar(parked)
    try:
        data = json.loads(meta.read_text())
    except (OSError, ValueError):
        data = None
    with contextlib.suppress(FileNotFoundError):
        meta.unlink()
    size = target.stat().st_size
    if not data or data.get("url") != url or not size or not (data.get("etag") or data.get("last_modified")):
        target.write_bytes(b"")
        return None
    return Resumable(size, data.get("etag"), data.get("last_modified"), data.get("length"))


def park(path: Path, url: str) -> bool:
    """Keep an unfinished resumable download for the next run; True when kept."""
    meta = sidecar(path)
    try:
        if not meta.exists() or not path.stat().st_size:
            return False
        parked = path.parent / f"resume-{url_key(url)}.part"
        os.replace(path, parked)
        os.replace(meta, sidecar(parked))
    except FileNotFoundError:
        return False
    log.info("kept %d bytes of %s to resume next time", parked.stat().st_size, url)
    return True


def discard(path: Path) -> None:
    for each in (path, sidecar(path)):
        with contextlib.suppress(FileNotFoundError):
            each.unlink()


def sweep_partial_downloads(directory: Path, *, now: float | None = None, legacy: bool = True) -> list[tuple[Path, int]]:
    """Tidy the partial downloads of processes that are gone: a resumable copy is parked for
    the next download of its URL, the rest removed. Returns (path, size) of each removed.
    `legacy=False` leaves `.part` files without our name pattern alone (a shared temp dir)."""
    from basecrawler.store.core import pid_alive

    removed: list[tuple[Path, int]] = []
    if not directory.is_dir():
        return removed
    now = time.time() if now is None else now
    for path in sorted(directory.glob("*.part")):
        match = _PARTIAL_RE.match(path.name)
        try:
            stat = path.stat()
            if _RESUME_RE.match(path.name):
                if now - stat.st_mtime < RESUMABLE_AGE_S:
                    continue
            elif match:
                if pid_alive(int(match.group(1))):
                    continue
                if match.group(2) and sidecar(path).exists() and stat.st_size and now - stat.st_mtime < RESUMABLE_AGE_S:
                    parked = directory / f"resume-{match.group(2)}.part"
                    os.replace(path, parked)
                    os.replace(sidecar(path), sidecar(parked))
                    log.info("kept a partial download of %d bytes to resume (%s)", stat.st_size, parked.name)
                    continue
            elif not legacy or now - stat.st_mtime < LEGACY_PARTIAL_AGE_S:
                continue
            discard(path)
        except FileNotFoundError:
            continue  # its owner finished with it meanwhile
        removed.append((path, stat.st_size))
    for meta in directory.glob("dl-*.json"):   # a sidecar whose .part went (killed between the two)
        match = re.match(r"^dl-(\d+)-", meta.name)
        if match and not pid_alive(int(match.group(1))) and not meta.with_suffix(".part").exists():
            with contextlib.suppress(FileNotFoundError):
                meta.unlink()
    return removed


def remove_dead_writers(paths, name_re: re.Pattern, *, now: float | None = None,
                        legacy_age_s: float = LEGACY_PARTIAL_AGE_S) -> list[tuple[Path, int]]:
    """Remove each file whose name (`name_re`, group 1: the writer's pid) says its writer is
    gone, and each file without a pid older than `legacy_age_s`; returns (path, size) removed."""
    from basecrawler.store.core import pid_alive

    now = time.time() if now is None else now
    removed = []
    for path in paths:
        match = name_re.match(path.name)
        try:
            stat = path.stat()
            if match and pid_alive(int(match.group(1))) or not match and now - stat.st_mtime < legacy_age_s:
                continue
            path.unlink()
        except FileNotFoundError:
            continue   # its writer finished with it meanwhile
        removed.append((path, stat.st_size))
    return removed


def hash_existing(path: Path, digest) -> int:
    """Feed the bytes already on disk into `digest`; returns their count."""
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return size


__all__ = ["Resumable", "RangeMismatch", "claim", "remove_dead_writers", "park", "discard", "note_resumable", "partial_prefix",
           "sweep_partial_downloads", "url_key", "hash_existing", "LEGACY_PARTIAL_AGE_S", "RESUMABLE_AGE_S"]
