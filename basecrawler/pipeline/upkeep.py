"""Housekeeping around a run, never part of it: rows and half downloads left by killed
processes, and the raw archive's retention. None of it may fail a crawl."""
from __future__ import annotations

import logging

from basecrawler.fetch.archive import Archive, sweep_temp_files
from basecrawler.config import Settings
from basecrawler.errors import CrawlerError
from basecrawler.store.core import Store

log = logging.getLogger("basecrawler")


def recover_after_crash(store: Store, source: str, run_id: int | None) -> None:
    """Under the run lock: close run rows left by killed processes, drop their half downloads."""
    from basecrawler.fetch.http import sweep_partial_downloads

    closed = store.runs.close_dead_runs(exclude_run_id=run_id, lock_held=True)
    if closed:
        log.warning("%s: %d earlier run(s) whose process is gone marked crashed (ids %s)", source,
                    len(closed), ", ".join(map(str, closed)))
    # The HTTP client streams bodies into <db dir>/tmp (see HttpClient.download_to_file).
    removed = sweep_partial_downloads(store.directory / "tmp")
    if removed:
        log.warning("%s: removed %d partial download(s) left by processes that are gone (%.1f MB)",
                    source, len(removed), sum(size for _, size in removed) / 1e6)
    # The raw archive writes each body to a temp file beside it first (see archive.py).
    from basecrawler.fetch.artifacts import sweep_segments

    removed = sweep_temp_files(store.directory / "archive") + sweep_segments(store.directory / "artifacts")
    if removed:
        log.warning("%s: removed %d unfinished archive or document file(s) left by processes that are gone (%.1f MB)",
                    source, len(removed), sum(size for _, size in removed) / 1e6)


def prune_archive(store: Store, settings: Settings, source: str) -> None:
    """Apply the archive retention (BASECRAWLER_ARCHIVE_RETENTION_DAYS) once per run."""
    if settings.archive_retention_days <= 0 or not settings.archive_enabled:
        return
    try:
        Archive(store).prune(settings.archive_retention_days)
    except (OSError, CrawlerError) as exc:  # housekeeping must never fail a crawl (nor a lost database)
        log.warning("%s: archive pruning skipped: %s", source, exc)


__all__ = ["recover_after_crash", "prune_archive"]
