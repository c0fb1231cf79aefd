"""Raw response archive: every body stored once by sha256 (gzip) next to the database and
indexed in the `responses` table. It lets a 304 reuse the body, and a dead letter be
re-parsed later without fetching again.

Layout: `<db dir>/archive/<sha[:2]>/<sha>.gz`. File names come from hashes only, never from
URLs, so no URL can steer a path.
"""
from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

from .dates import utc_now_iso

log = logging.getLogger(__name__)


class Archive:
    def __init__(self, store, root: Path | None = None, enabled: bool = True):
        self.store = store
        self.root = Path(root) if root else store.directory / "archive"
        self.enabled = enabled

    def path_for(self, sha256: str) -> Path:
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise ValueError(f"not a sha256 hex digest: {sha256!r}")
        return self.root / sha256[:2] / f"{sha256}.gz"

    def put_bytes(self, body: bytes) -> str:
        sha = hashlib.sha256(body).hexdigest()
        if self.enabled:
            target = self.path_for(sha)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
                with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=5, mtime=0) as gz:
                    gz.write(body)
                os.replace(tmp, target)
        return sha

    def put_file(self, path: Path, sha256: str) -> None:
        """Archive a body already written to disk (streamed downloads), without loading it."""
        if not self.enabled:
            return
        target = self.path_for(sha256)
        if target.exists():
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=3, mtime=0) as gz, \
                open(path, "rb") as src:
            shutil.copyfileobj(src, gz, 1 << 20)
        os.replace(tmp, target)

    def has(self, sha256: str) -> bool:
        return self.enabled and self.path_for(sha256).exists()

    def get_bytes(self, sha256: str) -> bytes:
        with gzip.open(self.path_for(sha256), "rb") as gz:
            return gz.read()

    def open(self, sha256: str):
        """A binary file object over the stored body (streamed, not loaded)."""
        return gzip.open(self.path_for(sha256), "rb")

    def record(self, *, url: str, method: str, status: int, content_type: str | None, etag: str | None,
               last_modified: str | None, sha256: str | None, size: int | None) -> None:
        self.store.write(lambda db: db.conn.execute(
            "INSERT INTO responses (url, method, status, content_type, etag, last_modified, sha256, size, fetched_at) "
            "VALUES (?,?,?,?,?,?,?,?,?)",
            [url, method, status, content_type, etag, last_modified, sha256, size, utc_now_iso()],
        ))

    def validators_for(self, url: str) -> dict | None:
        """The newest archived 200 for this URL with ETag/Last-Modified and its body present."""
        rows = self.store.query(
            "SELECT etag, last_modified, sha256, content_type FROM responses WHERE url = ? AND status = 200 "
            "AND sha256 IS NOT NULL AND (etag IS NOT NULL OR last_modified IS NOT NULL) ORDER BY id DESC LIMIT 1",
            [url],
        )
        if rows and self.has(rows[0]["sha256"]):
            return rows[0]
        return None

    def prune(self, retention_days: int) -> int:
        """Drop bodies older than the retention that no open dead letter still points at."""
        if retention_days <= 0 or not self.enabled:
            return 0
        cutoff = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=retention_days)).isoformat(timespec="seconds")
        old = self.store.query(
            "SELECT DISTINCT sha256 FROM responses WHERE fetched_at < ? AND sha256 IS NOT NULL AND sha256 NOT IN "
            "(SELECT sha256 FROM responses WHERE fetched_at >= ? AND sha256 IS NOT NULL) AND sha256 NOT IN "
            "(SELECT response_sha256 FROM dead_letters WHERE resolved_at IS NULL AND response_sha256 IS NOT NULL)",
            [cutoff, cutoff],
        )
        removed = 0
        for row in old:
            path = self.path_for(row["sha256"])
            if path.exists():
                path.unlink()
                removed += 1
        self.store.write(lambda db: db.conn.execute("DELETE FROM responses WHERE fetched_at < ?", [cutoff]))
        if removed:
            log.info("archive: pruned %d bodies older than %d days", removed, retention_days)
        return removed
