"""What one source run produced: its counts, its status, and the one line that reports them.

The run line adds up. An item that `fetch()` yields either produces records (one or several:
a jp list PDF or a ca row group holds many), or produces none and is then counted exactly once
as `skipped` (by design: `Skip(reason)` or nothing returned) or `unparseable` (parse failed and
the item is a dead letter). Every record then ends in exactly one of `out_of_range`, `new`,
`updated`, `unchanged`, `merged` (its key was already produced earlier in this run: the same
recall in two weekly reports) or `store_failed` (a dead letter). So, per run:

    parsed   = out_of_range + new + updated + unchanged + merged + store_failed
    fetched  = items with records + skipped + unparseable       (fetched = parsed when 1:1)

`saved` is new + updated + unchanged. `dead_lettered` counts every dead letter of the run:
unparseable items, store failures, and letters a source writes itself for things that never
became an item (a weekly report that would not download, one bad part of a list PDF).
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field

from basecrawler.formats.dates import utc_now_iso
from basecrawler.errors import CrawlerError

log = logging.getLogger("basecrawler")


@dataclass
class RunCounts:
    """See the module docstring for the equations these counts satisfy."""

    fetched: int = 0
    parsed: int = 0
    out_of_range: int = 0
    saved: int = 0
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    merged: int = 0
    skipped: int = 0
    skip_reasons: dict = field(default_factory=dict)
    unparseable: int = 0
    store_failed: int = 0
    dead_lettered: int = 0

    def skip(self, reason: str) -> None:
        self.skipped += 1
        self.skip_reasons[reason] = self.skip_reasons.get(reason, 0) + 1


@dataclass
class RunResult:
    source: str
    run_id: int | None
    status: str                        # succeeded / failed / suspect / interrupted
    counts: RunCounts = field(default_factory=RunCounts)
    duration_s: float = 0.0
    error: str | None = None
    http_stats: dict = field(default_factory=dict)
    enrichment_stats: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)   # input problems handled without loss

    @property
    def ok(self) -> bool:
        return self.status == "succeeded"

    def summary_line(self) -> str:
        c = self.counts
        reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(c.skip_reasons.items()))
        line = (
            f"{self.source}: fetched {c.fetched} → parsed {c.parsed} → out of range {c.out_of_range} → "
            f"saved {c.saved} (new {c.new}, updated {c.updated}, unchanged {c.unchanged}) → merged {c.merged} → "
            f"skipped {c.skipped}{f' ({reasons})' if reasons else ''} → unparseable {c.unparseable} → "
            f"store failed {c.store_failed} → dead-lettered {c.dead_lettered} [{self.status} {self.duration_s:.1f}s]"
        )
        if self.warnings:
            line += f" — warnings {len(self.warnings)}: {'; '.join(self.warnings[:3])[:300]}"
        if self.error:
            line += f" — {self.error}"
        return line


def judge(source: str, mode: str, counts: RunCounts) -> str:
    """The status of a run that ended without an error: `suspect` when its counts say the
    source's layout may have changed (a full run that fetched nothing, most items unparseable)."""
    if mode == "full" and counts.fetched == 0:
        log.error("%s: a full run fetched nothing — the source layout may have changed", source)
        return "suspect"
    attempted = counts.parsed + counts.unparseable
    if attempted and counts.unparseable * 2 > attempted:
        log.error("%s: %d of %d items failed to parse", source, counts.unparseable, attempted)
        return "suspect"
    return "succeeded"


def record_run(store, run_id: int | None, result: RunResult) -> None:
    """Log the run line (at the level its status deserves) and keep it in `crawl_runs`."""
    line = result.summary_line()
    # interrupted: a stop was asked for and what was fetched is stored: handled, nothing lost.
    {"succeeded": log.info, "interrupted": log.warning}.get(result.status, log.error)(line)
    try:
        store.runs.update_run(
            run_id, status=result.status, finished_at=utc_now_iso(), duration_s=round(result.duration_s, 3),
            error=result.error, summary=line, http_stats=result.http_stats,
            enrichment_stats=result.enrichment_stats, **asdict(result.counts),
        )
    except Exception as exc:  # the run record itself could not be written: say so loudly
        log.error("%s: could not record the run: %s", result.source, describe(exc),
                  exc_info=not isinstance(exc, CrawlerError))   # a classified failure needs no traceback


def not_started(result: RunResult, exc: Exception, lock) -> RunResult:
    """A run that failed before it could be recorded (its database unreachable): one ERROR
    line, a traceback only for an unclassified error, the run lock given back."""
    lock.release()
    result.error = describe(exc)
    log.error("%s: source failed before it started: %s", result.source, result.error,
              exc_info=not isinstance(exc, CrawlerError))
    return result


def describe(exc: BaseException) -> str:
    """An error as the run line shows it: class, message and the URL when it has one."""
    text = f"{type(exc).__name__}: {exc}"
    url = getattr(exc, "url", None)
    if url and url not in text:
        text += f" [{url}]"
    return text


__all__ = ["RunCounts", "RunResult", "judge", "record_run", "describe", "not_started"]
