"""One runner for "crawl these sources": `basecrawler run` and the scheduler's daily job both
call `run_sources`, so isolation, the stop request, the exit status and the closing line of
counts are written once.

- Isolation: one source failing (or its constructor raising) never stops the others.
- Stop: `stop` is a StopEvent (stopping.py) set by a SIGINT/SIGTERM handler. Its hooks cut
  what is in flight at once (the HTTP client shuts its sockets down, so a read blocked on a
  slow server returns); the running source ends there or at its next item boundary, keeps what
  it stored and records its run `interrupted`; sources after it are not started (they are
  listed as `not_started`).
- Offline: when every source failed because its hosts could not be reached (name resolution,
  connection refused), the summary says so and points at the offline replay set, as the last
  line: a caller that prints a closing line of its own (the scheduler) passes
  `hint_offline=False` and logs `offline_hint` after it.
- Job hooks: code outside the framework (the translation worker) joins the daily job through
  `register_job_hook` or the entry-point group `basecrawler.job_hooks`, so `basecrawler/`
  never imports it.
"""
from __future__ import annotations

import importlib.metadata
import signal
import logging
import threading
from dataclasses import dataclass, field
from typing import Callable, Mapping

from basecrawler.config import Settings
from basecrawler.store.diskfull import is_disk_full
from basecrawler.pipeline.registry import configure_hint, unconfigured
from basecrawler.stopping import StopEvent
from basecrawler.store.core import Store
from basecrawler.store.engines.dialect import dialect_of

log = logging.getLogger("basecrawler")

JOB_HOOK_GROUP = "basecrawler.job_hooks"


@dataclass
class RunSummary:
    results: list = field(default_factory=list)           # RunResult per source that ran
    crashed: dict = field(default_factory=dict)           # source id → error (could not even start)
    not_started: list = field(default_factory=list)       # skipped because a stop was requested
    not_configured: list = field(default_factory=list)    # skipped: an endpoint the operator must set is unset
    stopped: bool = False
    disk_full: bool = False                               # a source stopped on a full disk; the rest not started

    @property
    def failed_sources(self) -> list[str]:
        return [r.source for r in self.results if not r.ok and r.status != "interrupted"] + list(self.crashed)

    @property
    def interrupted_sources(self) -> list[str]:
        return [r.source for r in self.results if r.status == "interrupted"]

    @property
    def ok(self) -> bool:
        return not self.failed_sources and not self.stopped

    @property
    def all_unreachable(self) -> bool:
        """Every source ran and failed only because its hosts could not be reached."""
        return bool(self.results) and not self.crashed and all(
            not r.ok and r.http_stats.get("gave_up/unreachable") for r in self.results)

    def statuses(self) -> dict[str, str]:
        return {**{r.source: r.status for r in self.results}, **{s: "crashed" for s in self.crashed},
                **{s: "not_started" for s in self.not_started}, **{s: "not_configured" for s in self.not_configured}}

    def summary_line(self) -> str:
        total = len(self.results) + len(self.crashed) + len(self.not_started) + len(self.not_configured)
        succeeded = sum(1 for r in self.results if r.ok)
        line = (f"{total} sources: {succeeded} succeeded, {len(self.failed_sources)} failed or suspect"
                + (f", {len(self.interrupted_sources)} interrupted" if self.interrupted_sources else "")
                + (f", {len(self.not_started)} not started" if self.not_started else "")
                + (f", {len(self.not_configured)} not configured" if self.not_configured else "")
                + " (" + ", ".join(f"{s}={status}" for s, status in self.statuses().items()) + ")")
        return line


def run_sources(crawlers: Mapping[str, type], *, settings: Settings, mode: str = "incremental",
                since=None, until=None, transport=None, stop: threading.Event | None = None,
                progress_factory: Callable[[str], object] | None = None, store: Store | None = None,
                hint_offline: bool = True) -> RunSummary:
    """Run each crawler class in `crawlers` (source id → class) in order, isolated."""
    summary = RunSummary()
    own_store = store is None
    store = Store(settings.db_path) if own_store else store
    try:
        for source_id, crawler_class in crawlers.items():
            if summary.disk_full:   # every later source would fail the same way
                summary.not_started.append(source_id)
                continue
            if stop is not None and stop.is_set():
                summary.stopped = True
                summary.not_started.append(source_id)
                continue
            # A replay set (or a caller's own transport) stands for the endpoint: nothing is
            # fetched from the placeholder host then.
            routed = settings.replay_dir is not None or transport is not None
            missing = [] if routed else unconfigured(crawler_class)
            if missing:
                summary.not_configured.append(source_id)
                log.log(logging.INFO if len(crawlers) > 1 else logging.WARNING, "%s: skipped, %s",
                        source_id, configure_hint(crawler_class, missing))
                continue
            try:
                crawler = crawler_class(store, mode=mode, since=since, until=until, settings=settings,
                                        transport=transport, stop=stop,
                                        progress=progress_factory(source_id) if progress_factory else None)
                summary.results.append(crawler.run())
                summary.disk_full = is_disk_full(summary.results[-1].error)
            except Exception as exc:  # run() never raises, but a constructor or the lock can
                summary.crashed[source_id] = f"{type(exc).__name__}: {exc}"
                summary.disk_full = is_disk_full(exc)
                log.error("%s: source could not run: %s", source_id, summary.crashed[source_id],
                          exc_info=not summary.disk_full)
        if not summary.disk_full and any(r.counts.new or r.counts.updated for r in summary.results):
            keep_statistics(store)
            keep_facet_counts(store)
        if not summary.disk_full:   # watches: never changes the summary, never raises (watch/delivery.py)
            from basecrawler.watch.delivery import deliver_after_run
            deliver_after_run(store, settings, stop)
    finally:
        if own_store:
            store.close()
    summary.stopped = summary.stopped or bool(stop is not None and stop.is_set())
    if summary.not_started:
        log.warning("%s; not started: %s", "disk full" if summary.disk_full else "stopped on request",
                    ", ".join(summary.not_started))
    if len(crawlers) > 1:  # ERROR only when a source failed; a requested stop is handled (WARNING)
        level = logging.ERROR if summary.failed_sources else logging.WARNING if summary.stopped else logging.INFO
        log.log(level, "all: %s", summary.summary_line())
    if hint_offline and summary.all_unreachable:
        from basecrawler.fetch.replay import offline_hint
        log.error(offline_hint(settings.db_path))
    return summary


def keep_statistics(store: Store) -> None:
    """After the runs that changed data, SQLite's planner gets statistics of each type's table
    when it has none or they are far off (recordtypes/tables.py `refresh_statistics`);
    PostgreSQL's autovacuum keeps its own. A planner's aid: a failure is a WARNING."""
    if dialect_of(store).name != "sqlite":
        return
    try:
        from basecrawler.recordtypes import record_types
        from basecrawler.recordtypes.statistics import refresh_statistics

        tables = [rt.table for rt in record_types().values()]
        measured = store.write(lambda db: [t for t in tables if db[t].exists() and refresh_statistics(db.conn, t)])
        if measured:
            log.debug("planner statistics measured for %s", ", ".join(measured))
    except Exception as exc:
        log.warning("planner statistics not measured (searches may take a slower plan): %s", exc)


def keep_facet_counts(store: Store) -> None:
    """After the runs that changed data, the web view's whole-table facet counts are counted
    once and kept (reading/facetcounts.py), so its first visitor does not wait for them
    (0.7–0.9 s at a million records, against ~3 s on that visit). A cache: a failure is a
    WARNING and costs that visitor the time, never the runs."""
    try:
        from basecrawler.reading.facetcounts import store_whole_table_counts

        store_whole_table_counts(store)
    except Exception as exc:
        log.warning("facet counts for the web view not kept (its first visitor counts them): %s", exc)


# ---- hooks run after the sources of a scheduled job ---------------------------------------
_job_hooks: dict[str, Callable] = {}


def register_job_hook(name: str, hook: Callable) -> None:
    """`hook(store, settings=..., stop=...)` runs after the sources of every scheduled job and
    returns a one-line outcome (str), or raises. Registering a name again replaces it."""
    _job_hooks[name] = hook


def job_hooks() -> dict[str, Callable]:
    """Registered hooks plus those of installed packages (entry-point group basecrawler.job_hooks)."""
    hooks = {}
    for entry_point in importlib.metadata.entry_points(group=JOB_HOOK_GROUP):
        try:
            hooks[entry_point.name] = entry_point.load()
        except Exception as exc:  # a broken plugin must not stop the crawl it follows
            log.warning("job hook %s could not be loaded: %s", entry_point.name, exc)
    hooks.update(_job_hooks)
    return hooks




def translation_backend_factory() -> Callable | None:
    """`backend_from_env(environ)` of the installed translation package (entry point
    `basecrawler.translation` → `backend_from_env`), or None; for `doctor`'s reachability check."""
    for entry_point in importlib.metadata.entry_points(group="basecrawler.translation"):
        if entry_point.name == "backend_from_env":
            try:
                return entry_point.load()
            except Exception as exc:
                log.warning("translation backend factory could not be loaded: %s", exc)
    return None


class stop_on_signals:
    """`with stop_on_signals() as stop:` — SIGINT/SIGTERM set `stop` (a StopEvent) instead of
    raising: its hooks cut in-flight HTTP exchanges, so the running source ends within seconds
    with its run recorded `interrupted`; the previous handlers come back at once, so a second
    signal aborts. `on_stop()` runs in the handler too (the scheduler uses it to stop scheduling)."""

    def __init__(self, on_stop: Callable[[], None] | None = None):
        self.stop = StopEvent()
        self.on_stop = on_stop
        self._previous: dict = {}

    def _handle(self, signum, _frame) -> None:
        log.warning("%s received; stopping: requests in flight are cut (signal again to abort)",
                    signal.Signals(signum).name)
        self._restore()
        self.stop.set()
        if self.on_stop is not None:
            self.on_stop()

    def _restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def __enter__(self) -> threading.Event:
        if threading.current_thread() is threading.main_thread():  # signals can only be set there
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self.stop

    def __exit__(self, *exc) -> None:
        self._restore()


__all__ = ["RunSummary", "run_sources", "keep_facet_counts", "register_job_hook", "job_hooks", "stop_on_signals",
           "translation_backend_factory", "JOB_HOOK_GROUP"]
