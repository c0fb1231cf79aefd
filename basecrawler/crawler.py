"""BaseCrawler: the fixed pipeline fetch → parse → date filter → COALESCE upsert →
enrichment → run log. A source implements `fetch()` and `parse()` (and optionally
`fetch_detail()`); `run()` is final and owns everything else.

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

import abc
import datetime as dt
import logging
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Iterable, Iterator, final
from urllib.parse import urlsplit

from pydantic import ValidationError

from .config import Settings, endpoint_override
from .dates import SENTINEL_DATE, is_plausible_date
from .errors import CrawlerError, FetchError, NotFound, Skip, SourceFailed
from .model import Recall
from .runlock import RunLock
from .archive import Archive
from .store import Store, decode_raw

log = logging.getLogger("basecrawler")

MODES = ("incremental", "full")


@dataclass
class Raw:
    """A raw item with where it came from; sources may yield it instead of bare data so a
    dead letter can point at the URL and the archived response."""

    data: Any
    url: str | None = None
    response_sha256: str | None = None


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


class Interrupted(CrawlerError):
    """A stop was requested (SIGINT/SIGTERM). Never a dead letter: `dead_letter()` re-raises it
    when a source's own `except Exception` around an item catches it."""

    kind = "interrupted"


class BaseCrawler(abc.ABC):
    """Subclass this in `sources/<id>.py`. Set the class attributes, implement fetch/parse."""

    source: ClassVar[str] = ""
    country: ClassVar[str] = ""
    source_lang: ClassVar[str] = "en"
    endpoints: ClassVar[dict[str, str]] = {}
    # Politeness: a source may declare a slower rate / fewer concurrent requests per host.
    rate_per_s: ClassVar[float | None] = None
    concurrency: ClassVar[int | None] = None
    # A source whose records are dated well before they are published (a monthly list of
    # last month's recalls) needs a longer incremental look-back than the default overlap.
    min_overlap_days: ClassVar[int] = 0
    # Hosts besides the endpoints' (and their overrides') that downloads may reach, e.g. a
    # CDN the agency links its documents on: "host" or "host:port". Anything else is a
    # `foreign_host` dead letter (enforced by the HTTP client).
    allowed_hosts: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, store: Store | str | None = None, *, mode: str = "incremental",
                 since: dt.date | str | None = None, until: dt.date | str | None = None,
                 settings: Settings | None = None, transport=None, clock=None, sleep=None, progress=None,
                 stop=None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        self.settings = settings or Settings.from_env()
        if store is None:
            store = self.settings.db_path
        self.store = store if isinstance(store, Store) else Store(store)
        self.mode = mode
        self._explicit_since = _as_date(since)
        self.since: dt.date | None = self._explicit_since
        self.until: dt.date | None = _as_date(until)
        self._transport = transport
        self._clock = clock or time.time
        # `stop` (a threading.Event) ends the run at the next item boundary, or at once during
        # an HTTP back-off wait: a scheduler asked to stop must not sit out a retry ladder.
        self._stop = stop
        self._sleep = sleep or (time.sleep if stop is None else self._stoppable_sleep)
        self._http = None
        self.run_id: int | None = None
        self.counts = RunCounts()
        self._stored_keys: set[tuple[str, str]] = set()
        self._transport_bases: list[tuple[str, str]] | None = None
        self.warnings: list[str] = []
        self._progress = progress  # callable(fetched, None) for a terminal display, or None
        self._ledger = None

    # ---- what a source implements -----------------------------------------------------
    @abc.abstractmethod
    def fetch(self) -> Iterable[Any]:
        """Yield raw items (dicts, strings, bytes, or `Raw`). Use self.http and self.url()."""

    @abc.abstractmethod
    def parse(self, raw: Any) -> dict | Recall | Iterable[dict | Recall] | None:
        """Map one raw item to Recall fields: a dict or Recall, several of them, or None to skip."""

    def fetch_detail(self, recall: dict) -> dict | None:
        """Optional second phase. Return fields to add (COALESCE), None for "nothing to add",
        or raise NotFound for "not there yet" (the enrichment ladder retries with backoff)."""
        raise NotImplementedError

    def needs_detail(self, record: Recall) -> bool:
        """Which stored records the ladder should enrich; default: the model is missing."""
        return record.model_original is None

    # ---- helpers for sources ----------------------------------------------------------
    @classmethod
    def has_detail_phase(cls) -> bool:
        return cls.fetch_detail is not BaseCrawler.fetch_detail

    def endpoint(self, name: str) -> str:
        """Base URL (scheme+host[+port]) of an endpoint, after the environment override."""
        base = endpoint_override(self.source, name) or self.endpoints[name]
        parts = urlsplit(base)
        return f"{parts.scheme}://{parts.netloc}"

    def url(self, endpoint: str, path: str = "") -> str:
        """Absolute URL on an endpoint: only scheme+host change with an override, paths stay."""
        if path and not path.startswith("/"):
            path = "/" + path
        return self.endpoint(endpoint) + path

    def public_url(self, url: str) -> str:
        """A URL on an overridden endpoint (mirror, proxy, test server) written back on the
        source's declared public host: the override is transport, never what a record links to."""
        for transport_base, public_base in self._overridden_bases():
            if url.startswith(transport_base) and url[len(transport_base):len(transport_base) + 1] in ("", "/", "?", "#"):
                return public_base + url[len(transport_base):]
        return url

    def _overridden_bases(self) -> list[tuple[str, str]]:
        if self._transport_bases is None:
            bases = []
            for name, declared in self.endpoints.items():
                override = endpoint_override(self.source, name)
                if override:
                    bases.append((_origin(override), _origin(declared)))
            self._transport_bases = bases
        return self._transport_bases

    @property
    def ledger(self):
        """The list ledger (see `ledger.py`) for sources that read a list before its items."""
        if self._ledger is None:
            from .ledger import Ledger

            self._ledger = Ledger(self.store, self.source, max_attempts=self.settings.ledger_max_attempts,
                                  retries=self._explicit_since is None and self.until is None or self.mode == "full",
                                  requeue=self.mode == "full")
        return self._ledger

    def download_hosts(self) -> set[str]:
        """Where this source's requests may go: every endpoint's host (declared and
        overridden), `allowed_hosts`, and BASECRAWLER_<SOURCE>_ALLOWED_HOSTS (comma-separated)."""
        from .http import host_key

        hosts = set()
        for name, declared in self.endpoints.items():
            hosts.add(host_key(declared))
            override = endpoint_override(self.source, name)
            if override:
                hosts.add(host_key(override))
        extra = self.settings.source_setting(self.source, "allowed_hosts") or ""
        for host in [*self.allowed_hosts, *extra.split(",")]:
            if host.strip():
                hosts.add(host_key(host.strip() if "//" in host else "//" + host.strip()))
        return hosts

    @property
    def http(self):
        if self._http is None:
            from .http import HttpClient

            self._http = HttpClient(
                settings=self.settings, store=self.store, transport=self._transport,
                rate_per_s=self.rate_per_s, concurrency=self.concurrency,
                clock=self._clock, sleep=self._sleep, source=self.source,
                allowed_hosts=self.download_hosts() if self.endpoints else None,
            )
        return self._http

    def _stoppable_sleep(self, seconds: float) -> None:
        if self._stop.wait(seconds):
            raise Interrupted()

    def _check_stop(self) -> None:
        if self._stop is not None and self._stop.is_set():
            raise Interrupted()

    def dead_letter(self, raw: Any, error: BaseException | str, *, stage: str = "fetch",
                    kind: str | None = None, url: str | None = None, recall_number: str | None = None) -> None:
        """Keep an item the source could not turn into records (and count it). Sources call this
        for a per-item failure they catch themselves, e.g. one unreadable PDF of many."""
        if isinstance(error, Interrupted):
            raise error  # a requested stop, caught by an `except Exception` on its way out
        if isinstance(raw, Raw):
            url = url or raw.url
            response_sha = raw.response_sha256
            raw = raw.data
        else:
            response_sha = None
        if kind is None:
            kind = getattr(error, "kind", None) or ("parse_error" if stage == "parse" else "unexpected")
        if isinstance(error, FetchError):
            url = url or error.url
            response_sha = response_sha or error.response_sha256
        if response_sha is None and self._http is not None and stage in ("parse", "store"):
            # The body the item came from, so the letter can be traced back to the archive.
            response_sha = self._http.last_sha256
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        letter_id = self.store.add_dead_letter(
            source=self.source, run_id=self.run_id, stage=stage, kind=kind, error=message, raw=raw,
            recall_number=recall_number, url=url, response_sha256=response_sha,
        )
        self.counts.dead_lettered += 1
        if stage == "fetch" and self._ledger is not None:
            self._ledger.note_letter(letter_id)  # resolved once the list item is collected
        log.error("%s: dead letter (%s/%s) %s%s", self.source, stage, kind, message[:300],
                  f" [{url}]" if url else "")

    def warn(self, message: str) -> None:
        """An input problem handled with nothing lost (a repaired list, a lying charset, a list
        with no recall in it): a WARNING, and counted in the run line."""
        self.warnings.append(message)
        log.warning("%s: %s", self.source, message)

    # ---- the pipeline -----------------------------------------------------------------
    @final
    def run(self) -> RunResult:
        started = time.monotonic()
        self.counts = RunCounts()
        self.warnings = []
        lock = RunLock(self.store.path, self.settings.lock_timeout_s, scope=self.source)
        self._stored_keys = set()
        self._transport_bases = None
        result = RunResult(source=self.source, run_id=None, status="failed", counts=self.counts)
        if lock.try_acquire():
            self.run_id = self.store.start_run(self.source, self.mode, "running", os.getpid())
            waiting = False
        else:
            self.run_id = self.store.start_run(self.source, self.mode, "waiting", os.getpid())
            log.info("%s: waiting for the run lock held by pid %s", self.source, lock.holder_pid())
            waiting = True
        result.run_id = self.run_id
        try:
            if waiting:
                lock.acquire()  # may time out (BASECRAWLER_LOCK_TIMEOUT): a failed run, not a stuck row
                self.store.update_run(self.run_id, status="running")
            self._recover_after_crash()
            self._resolve_window()
            self.store.update_run(self.run_id, since=_iso(self.since), until=_iso(self.until))
            self._pipeline(result)
        except Interrupted:
            result.status = "interrupted"
        except Exception as exc:  # a failing source never escapes run(); it is a failed run
            result.status = "failed"
            result.error = _describe(exc)
            log.error("%s: source failed: %s", self.source, result.error, exc_info=not isinstance(exc, CrawlerError))
        except BaseException as exc:  # Ctrl-C / SystemExit: recorded as such, then passed on
            result.status = "interrupted"
            result.error = type(exc).__name__
            raise
        finally:
            if self._progress is not None and hasattr(self._progress, "close"):
                self._progress.close()
            if self._http is not None:
                result.http_stats = self._http.stats()
                self._http.close()
                self._http = None
            self._prune_archive()
            result.duration_s = time.monotonic() - started
            result.warnings = list(self.warnings)
            self._finish(result)
            lock.release()
        return result

    @final
    def retry_dead_letters(self) -> dict:
        """Re-parse this source's open parse/store dead letters with the current parser, from
        the kept raw input (no re-fetch), and store what now parses. Under the run lock."""
        outcome = {"retried": 0, "resolved": 0, "still_failing": 0}
        with RunLock(self.store.path, self.settings.lock_timeout_s, scope=self.source):
            letters = [l for l in self.store.open_dead_letters(self.source) if l["stage"] in ("parse", "store")]
            for letter in letters:
                outcome["retried"] += 1
                raw = decode_raw(letter["raw_kind"], letter["raw"], letter["raw_bytes"])
                error = None
                try:
                    if raw is None:  # only the whole response was kept: not one item parse() can take
                        raise ValueError("no raw item was kept for this letter; the next crawl fetches it again")
                    records = [self.prepare_record(r) for r in self._records_from(raw)]
                    stored = self.store.upsert_recalls(records, source=self.source, raws=[raw] * len(records))
                    if stored.failed:
                        error = stored.failed[0][1]
                except ValidationError as exc:
                    error = _short_validation(exc)
                except Exception as exc:
                    error = f"{type(exc).__name__}: {exc}"
                now = _now()
                if error is None:
                    outcome["resolved"] += 1
                    self.store.write(lambda db: db.conn.execute(
                        "UPDATE dead_letters SET resolved_at = ?, retried_at = ?, retry_count = retry_count + 1 WHERE id = ?",
                        [now, now, letter["id"]]))
                else:
                    outcome["still_failing"] += 1
                    self.store.write(lambda db: db.conn.execute(
                        "UPDATE dead_letters SET error = ?, retried_at = ?, retry_count = retry_count + 1 WHERE id = ?",
                        [error[:4000], now, letter["id"]]))
        log.info("%s: dead letters retried %d → resolved %d, still failing %d", self.source,
                 outcome["retried"], outcome["resolved"], outcome["still_failing"])
        return outcome

    def _records_from(self, raw: Any) -> Iterator[Recall]:
        """parse() output normalised to validated Recall objects (raises on any failure)."""
        produced = self.parse(raw)
        if produced is None:
            return
        if isinstance(produced, Skip):
            raise produced
        if isinstance(produced, (dict, Recall)):
            produced = [produced]
        for entry in produced:
            if isinstance(entry, Recall):
                yield entry
            else:
                entry = dict(entry)
                entry.setdefault("country", self.country)
                entry.setdefault("source_lang", self.source_lang)
                yield Recall.model_validate(entry)

    def _pipeline(self, result: RunResult) -> None:
        batch: list[tuple[Recall, Any]] = []
        fetch_error: Exception | None = None
        interrupted = False
        try:
            self._check_stop()
            for item in self.fetch():
                self.counts.fetched += 1
                if self._progress is not None:
                    self._progress(self.counts.fetched, None)
                for record, raw in self._parse_item(item):
                    record = self.prepare_record(record)
                    if not self._in_window(record) and not (self._ledger is not None and self._ledger.beyond_window):
                        self.counts.out_of_range += 1
                        continue
                    batch.append((record, raw))
                    if len(batch) >= self.settings.batch_size:
                        self._flush(batch)
                        batch = []
                self._check_stop()  # item boundary: everything parsed so far is kept
        except Interrupted:
            interrupted = True
        except Exception as exc:
            fetch_error = exc  # keep what was fetched so far, then report the failure
        self._flush(batch)
        if self._ledger is not None:
            self._ledger.commit()  # items whose records are all stored now (or that had none)
        if interrupted:
            raise Interrupted()
        if fetch_error is not None:
            if isinstance(fetch_error, FetchError) and fetch_error.kind == "unexpected":
                # The wrong kind of body (an HTML error page for JSON…): keep it as a dead letter.
                self.dead_letter(fetch_error.body, fetch_error, stage="fetch")
            raise fetch_error
        if self.has_detail_phase():
            from . import enrichment

            self._check_stop()
            result.enrichment_stats = enrichment.run_ladder(self)
        result.status = self._judge()

    def _parse_item(self, item: Any) -> Iterator[tuple[Recall, Any]]:
        raw = item.data if isinstance(item, Raw) else item
        letters_before = self.counts.dead_lettered
        try:
            records = list(self._records_from(raw))
        except Skip as skip:
            self.counts.skip(skip.reason)
            log.debug("%s: item skipped: %s", self.source, skip.reason)
            return
        except ValidationError as exc:
            self.counts.unparseable += 1
            self.dead_letter(item, _short_validation(exc), stage="parse", kind="validation")
            return
        except Exception as exc:
            self.counts.unparseable += 1
            self.dead_letter(item, exc, stage="parse", kind="parse_error")
            return
        if not records:
            if self.counts.dead_lettered > letters_before:
                self.counts.unparseable += 1  # parse() kept its parts as dead letters itself
            else:
                self.counts.skip("no record")  # parse() returned nothing and said nothing
            return
        for record in records:
            self.counts.parsed += 1
            yield record, raw

    def _flush(self, batch: list[tuple[Recall, Any]]) -> None:
        if not batch:
            return
        records = [record for record, _ in batch]
        outcome = self.store.upsert_recalls(records, source=self.source, raws=[raw for _, raw in batch])
        self.counts.merged += outcome.merged  # same key twice in this batch: folded into one row
        for key, what in outcome.by_key.items():
            if key in self._stored_keys:
                self.counts.merged += 1   # same key already stored by an earlier batch of this run
                continue
            self._stored_keys.add(key)
            setattr(self.counts, what, getattr(self.counts, what) + 1)
            self.counts.saved += 1
        if self._ledger is not None:
            self._ledger.commit()  # the list items these records came from are collected
        for row, error in outcome.failed:
            self.counts.store_failed += 1
            self.dead_letter(row.get("_raw"), error, stage="store", kind="store_error",
                             recall_number=row.get("recall_number"))
        if self.has_detail_phase():
            from . import enrichment

            failed_keys = {(row.get("country"), row.get("recall_number")) for row, _ in outcome.failed}
            enrichment.enqueue(self, [r for r in records if (r.country, r.recall_number) not in failed_keys])

    def prepare_record(self, record: Recall) -> Recall:
        """What every record goes through before the date window and the store (also records
        from the enrichment ladder and dead-letter retries): an implausible date becomes
        date-unknown with the raw date kept, and links name the public site."""
        update: dict[str, Any] = {}
        extra = record.extra
        if not record.date_unknown and not is_plausible_date(record.recall_date, self.today()):
            log.warning("%s %s: recall date %s is implausible (before 1900 or after tomorrow); stored as "
                        "date-unknown, raw date kept in extra", self.source, record.recall_number, record.recall_date)
            extra = {**extra, "implausible_recall_date": record.recall_date.isoformat()}
            update.update(recall_date=SENTINEL_DATE, date_unknown=True)
        if self._overridden_bases():
            if record.source_url:
                update["source_url"] = self.public_url(record.source_url)
            extra = self._public_links(extra)
        if extra is not record.extra:
            update["extra"] = extra
        return record.model_copy(update=update) if update else record

    def _public_links(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.public_url(value) if "://" in value else value
        if isinstance(value, dict):
            return {key: self._public_links(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._public_links(item) for item in value]
        return value

    def today(self) -> dt.date:
        """Today (UTC) by the injected clock, so "after tomorrow" is testable."""
        return dt.datetime.fromtimestamp(self._clock(), dt.timezone.utc).date()

    def _recover_after_crash(self) -> None:
        """Under the run lock: close run rows left by killed processes, drop their half downloads."""
        from .http import sweep_partial_downloads

        closed = self.store.close_dead_runs(exclude_run_id=self.run_id, lock_held=True)
        if closed:
            log.warning("%s: %d earlier run(s) whose process is gone marked crashed (ids %s)", self.source,
                        len(closed), ", ".join(map(str, closed)))
        # The HTTP client streams bodies into <db dir>/tmp (see HttpClient.download_to_file).
        removed = sweep_partial_downloads(self.store.directory / "tmp")
        if removed:
            log.warning("%s: removed %d partial download(s) left by processes that are gone (%.1f MB)",
                        self.source, len(removed), sum(size for _, size in removed) / 1e6)

    def _resolve_window(self) -> None:
        if self._explicit_since is None and self.mode == "incremental":
            # Only plausible dates count: one stored 9999-12-31 must not filter out every new record.
            newest = self.store.newest_recall_date(self.source, latest=self.today() + dt.timedelta(days=1))
            if newest:
                overlap = max(self.settings.overlap_days, self.min_overlap_days)
                self.since = dt.date.fromisoformat(newest) - dt.timedelta(days=overlap)
        elif self._explicit_since is None:
            self.since = None

    def _in_window(self, record: Recall) -> bool:
        if record.date_unknown:
            return True  # never drop a record because its date could not be read
        if self.since and record.recall_date < self.since:
            return False
        if self.until and record.recall_date > self.until:
            return False
        return True

    def _prune_archive(self) -> None:
        """Apply the archive retention (BASECRAWLER_ARCHIVE_RETENTION_DAYS) once per run."""
        if self.settings.archive_retention_days <= 0 or not self.settings.archive_enabled:
            return
        try:
            Archive(self.store).prune(self.settings.archive_retention_days)
        except OSError as exc:  # housekeeping must never fail a crawl
            log.warning("%s: archive pruning skipped: %s", self.source, exc)

    def _judge(self) -> str:
        c = self.counts
        if self.mode == "full" and c.fetched == 0:
            log.error("%s: a full run fetched nothing — the source layout may have changed", self.source)
            return "suspect"
        attempted = c.parsed + c.unparseable
        if attempted and c.unparseable * 2 > attempted:
            log.error("%s: %d of %d items failed to parse", self.source, c.unparseable, attempted)
            return "suspect"
        return "succeeded"

    def _finish(self, result: RunResult) -> None:
        line = result.summary_line()
        # interrupted: a stop was asked for and what was fetched is stored: handled, nothing lost.
        {"succeeded": log.info, "interrupted": log.warning}.get(result.status, log.error)(line)
        try:
            self.store.update_run(
                self.run_id, status=result.status, finished_at=_now(), duration_s=round(result.duration_s, 3),
                error=result.error, summary=line, http_stats=result.http_stats,
                enrichment_stats=result.enrichment_stats, **asdict(self.counts),
            )
        except Exception:  # the run record itself could not be written: say so loudly
            log.exception("%s: could not record the run", self.source)


def _as_date(value) -> dt.date | None:
    if value is None or isinstance(value, dt.date):
        return value
    return dt.date.fromisoformat(str(value))


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _iso(value: dt.date | None) -> str | None:
    return value.isoformat() if value else None


def _now() -> str:
    from .dates import utc_now_iso

    return utc_now_iso()


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    url = getattr(exc, "url", None)
    if url and url not in text:
        text += f" [{url}]"
    return text


def _short_validation(exc: ValidationError) -> str:
    parts = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]]
    return "validation failed: " + "; ".join(parts)


__all__ = ["BaseCrawler", "Interrupted", "Raw", "RunCounts", "RunResult", "Skip", "MODES", "NotFound", "SourceFailed"]
