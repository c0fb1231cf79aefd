"""Raw response archive: every body stored once by sha256 (gzip) next to the database and
indexed in the `responses` table. It lets a 304 reuse the body, and a dead letter be
re-parsed later without fetching again.

Layout: `<db dir>/archive/<sha[:2]>/<sha>.gz`. File names come from hashes only, never from
URLs, so no URL can steer a path. A body is written to `tmp<pid>-XXXX.tmp` beside its target
and renamed into place; a process killed mid-write leaves that file, which the next run's
`sweep_temp_files` removes once its pid is gone.
"""
from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import contextlib
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

from basecrawler.formats.dates import utc_now_iso
from basecrawler.store.engines.dialect import dialect_of

log = logging.getLogger(__name__)

_TEMP_RE = re.compile(r"^tmp(\d+)-.*\.tmp$")
LEGACY_TEMP_AGE_S = 3600   # a temp file without a pid (older versions) is removed once this old


@contextlib.contextmanager
def _temp_beside(target: Path):
    """A binary file beside `target`, renamed onto it when the block ends without an error and
    removed when it does not; named with our pid so a sweep knows whose it is."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f"tmp{os.getpid()}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as raw:
            yield raw
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def sweep_temp_files(root: Path, *, now: float | None = None) -> list[tuple[Path, int]]:
    """Remove the archive's temp files of processes that are gone (killed mid-write);
    returns (path, size) of each removed."""
    from basecrawler.fetch.partials import remove_dead_writers

    if not root.is_dir():
        return []
    return remove_dead_writers(root.glob("*/tmp*.tmp"), _TEMP_RE, now=now, legacy_age_s=LEGACY_TEMP_AGE_S)

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
                with _temp_beside(target) as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=5, mtime=0) as gz:
                    gz.write(body)
        return sha

    def put_file(self, path: Path, sha256: str) -> None:
        """Archive a body already written to disk (streamed downloads), without loading it."""
        if not self.enabled:
            return
        target = self.path_for(sha256)
        if target.exists():
            return
        with _temp_beside(target) as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=3, mtime=0) as gz, \
                open(path, "rb") as src:
            shutil.copyfileobj(src, gz, 1 << 20)

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
        d = dialect_of(self.store)
        self.store.write(lambda db: db.conn.execute(d.write(
            "INSERT INTO responses (url, method, status, content_type, etag, last_modified, sha256, size, fetched_at) "
            f"VALUES ({d.params(9)})"),
            [url, method, status, content_type, etag, last_modified, sha256, size, utc_now_iso()],
        ))

    def validators_for(self, url: str) -> dict | None:
        """The newest archived 200 for this URL with ETag/Last-Modified and its body present."""
        d = dialect_of(self.store)
        rows = self.store.query(d.query(
            f"SELECT etag, last_modified, sha256, content_type FROM responses WHERE url = {d.p} AND status = 200 "
            "AND sha256 IS NOT NULL AND (etag IS NOT NULL OR last_modified IS NOT NULL) ORDER BY id DESC LIMIT 1"),
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
        d = dialect_of(self.store)
        old = self.store.query(d.query(
            f"SELECT DISTINCT sha256 FROM responses WHERE fetched_at < {d.p} AND sha256 IS NOT NULL AND sha256 NOT IN "
            f"(SELECT sha256 FROM responses WHERE fetched_at >= {d.p} AND sha256 IS NOT NULL) AND sha256 NOT IN "
            "(SELECT response_sha256 FROM dead_letters WHERE resolved_at IS NULL AND response_sha256 IS NOT NULL)"),
            [cutoff, cutoff],
        )
        removed = 0
        for row in old:
            path = self.path_for(row["sha256"])
            if path.exists():
                path.unlink()
                removed += 1
        self.store.write(lambda db: db.conn.execute(d.write(f"DELETE FROM responses WHERE fetched_at < {d.p}"), [cutoff]))
        if removed:
            log.info("archive: pruned %d bodies older than %d days", removed, retention_days)
        return removed
