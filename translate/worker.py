"""The translation worker: fills the `_ko` columns of rows `WHERE translated_at IS NULL`.

Newest recall_date first, in batches. Resumable at any moment: a batch is written in one
transaction that stamps `translated_at` together with the `_ko` fields, and a row is written
only if its `translated_at` is still NULL and its originals are the ones that were translated.
A killed worker therefore loses at most the batch in flight and never writes a row twice; a
crawl that changes an original while the batch is in flight leaves that row pending.

Several workers may share one store (on PostgreSQL, on several machines): each batch is claimed
first (`translation_claimed_at/_by`, the rows taken with FOR UPDATE SKIP LOCKED on PostgreSQL),
so no two workers send the same row to a backend. A worker releases its unfinished claims when
it stops; the claims of one that was killed return after BASECRAWLER_PROCESSING_TIMEOUT.

Outcomes per row (`translation_status`):
- translated  every text translated (or reused from memory) and accepted by the guards;
- blocked     a guard rejected a text: its `_ko` stays empty, the reason is in translation_note;
- failed      the backend failed on this record's text alone;
- (pending)   the backend is down / rate-limited / out of quota: the run stops, nothing stamped.
`translate_pending(..., retry="failed"|"blocked")` puts such rows back in the queue first.
"""
from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from basecrawler.config import Settings
from basecrawler.dates import utc_now_iso
from basecrawler.model import KOREAN_COLUMNS, ORIGINAL_COLUMNS, TEXT_FIELDS

from . import guards
from .backends import CONFIGURE_HELP, Backend
from .errors import BackendItemError, BackendUnavailable, NoBackendConfigured
from .glossary import Glossary, glossary_from_env
from .memory import TranslationMemory, normalize_text
from .protect import Masked, mask, unmask

log = logging.getLogger(__name__)

DEFAULT_BATCH_ROWS = 100
RETRYABLE_STATUSES = ("failed", "blocked")


@dataclass
class TranslationReport:
    """Row counts of one worker run (translated and from_memory are disjoint)."""

    translated: int = 0      # rows that needed at least one new backend translation
    from_memory: int = 0     # rows served entirely by memory, glossary or protected terms
    blocked: int = 0
    failed: int = 0
    pending: int = 0         # rows still waiting when the run ended
    backend_down: bool = False
    skipped: int = 0         # changed by a crawl (or done by another worker) while in flight
    requeued: int = 0
    backend_calls: int = 0
    texts_sent: int = 0
    backend: str = ""
    error: str | None = None
    duration_s: float = 0.0

    @property
    def processed(self) -> int:
        return self.translated + self.from_memory + self.blocked + self.failed

    def summary_line(self) -> str:
        line = (f"translate: translated {self.translated}, from memory {self.from_memory}, blocked {self.blocked}, "
                f"failed {self.failed}, pending {self.pending}")
        if self.skipped:
            line += f", changed in flight {self.skipped}"
        line += f" [{self.backend or 'no backend'}: {self.backend_calls} calls, {self.texts_sent} texts, {self.duration_s:.1f}s]"
        if self.backend_down:
            line += f" stopped: {self.error}"
        return line


@dataclass
class _Text:
    """The outcome for one distinct (language, normalised text)."""

    translation: str | None = None
    # backend (new this batch) | memory (seen earlier this run) | memory-db (the memory table)
    # | local (nothing to send: codes, names, glossary terms) | blocked | failed
    origin: str = "backend"
    note: str | None = None


@dataclass
class _RowOutcome:
    row: dict
    values: dict = field(default_factory=dict)   # korean column → text or None
    status: str = "translated"
    note: str | None = None
    used_backend: bool = False


def requeue(store, statuses) -> int:
    """Put rows with these translation statuses back in the queue; returns how many."""
    statuses = [statuses] if isinstance(statuses, str) else list(statuses)
    unknown = [s for s in statuses if s not in RETRYABLE_STATUSES]
    if unknown:
        raise ValueError(f"can only retry {' or '.join(RETRYABLE_STATUSES)}, not {unknown[0]!r}")
    marks = ",".join("?" * len(statuses))
    return store.write(lambda db: db.conn.execute(
        f"UPDATE recalls SET translated_at = NULL, translation_status = NULL, translation_note = NULL "
        f"WHERE translated_at IS NOT NULL AND translation_status IN ({marks})", statuses).rowcount)


def count_pending(store) -> int:
    return store.scalar("SELECT COUNT(*) FROM recalls WHERE translated_at IS NULL")


def translate_pending(store, backend: Backend | None, *, limit: int | None = None, retry=None, progress=None,
                      glossary: Glossary | None = None, batch_rows: int | None = None,
                      target_lang: str = "ko", stop=None) -> TranslationReport:
    """Translate pending rows until none are left or `limit` rows were processed.

    `retry` ("failed", "blocked" or both) re-queues those rows first. `progress(done, total)`
    is called after each batch. Without `glossary` / `batch_rows` the environment decides
    (BASECRAWLER_GLOSSARY, BASECRAWLER_TRANSLATE_BATCH), so a scheduled run behaves like the
    command. Raises NoBackendConfigured when `backend` is None.
    """
    if backend is None:
        raise NoBackendConfigured(CONFIGURE_HELP)
    if glossary is None:
        glossary = glossary_from_env()
    if batch_rows is None:
        batch_rows = int(os.environ.get("BASECRAWLER_TRANSLATE_BATCH") or DEFAULT_BATCH_ROWS)
    return _Worker(store, backend, glossary=glossary, target_lang=target_lang).run(
        limit=limit, retry=retry, progress=progress, batch_rows=batch_rows, stop=stop)


class _Worker:
    def __init__(self, store, backend: Backend, *, glossary: Glossary | None, target_lang: str):
        self.store = store
        self.backend = backend
        self.glossary = glossary
        self.target_lang = target_lang
        self.memory = TranslationMemory(store, target_lang)
        self.seen: dict[tuple[str, str], _Text] = {}   # this run's outcomes, so nothing is sent twice
        self.report = TranslationReport(backend=backend.name)
        self.pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self.claimer = f"{store.session()} {uuid.uuid4().hex[:12]}"
        self.claim_timeout_s = Settings.from_env().processing_timeout_s

    # ---- the loop ---------------------------------------------------------------------
    def run(self, *, limit, retry, progress, batch_rows, stop=None) -> TranslationReport:
        started = time.monotonic()
        calls_before = self.backend.calls
        report = self.report
        if retry:
            report.requeued = requeue(self.store, retry)
            log.info("re-queued %d %s rows", report.requeued, "/".join([retry] if isinstance(retry, str) else retry))
        self._release_dead_claims()
        total = count_pending(self.store)
        if limit is not None:
            total = min(total, limit)
        done = 0
        position = None
        workers = max(1, int(getattr(self.backend, "concurrency", 1)))
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="translate") if workers > 1 else None
        try:
            # `stop` (the scheduler's SIGTERM event) ends the run between batches; claims go back.
            while (limit is None or done < limit) and not (stop is not None and stop.is_set()):
                size = batch_rows if limit is None else min(batch_rows, limit - done)
                rows = self._next_batch(position, size)
                if not rows:
                    break
                position = (rows[-1]["recall_date"], rows[-1]["id"])
                outcomes, new_memory, memory_uses = self._translate_rows(rows)
                self._write(outcomes, new_memory, memory_uses)
                done += len(rows)
                if progress:
                    progress(done, total)
                elif done // batch_rows % 10 == 0:
                    log.info("translate: %d/%d rows", done, total)
        except BackendUnavailable as exc:
            report.backend_down = True
            report.error = str(exc)
            log.error("translation stopped, rows stay pending: %s", exc)
        finally:
            if self.pool:   # on Ctrl-C do not wait for requests whose answers would be dropped
                self.pool.shutdown(wait=False, cancel_futures=True)
            self._release_claims()
            report.backend_calls = self.backend.calls - calls_before
            report.pending = count_pending(self.store)
            report.duration_s = time.monotonic() - started
        return report

    def _next_batch(self, position, size: int) -> list[dict]:
        """Claim the next `size` pending rows no live worker holds, newest first."""
        now = time.time()
        stamp = utc_now_iso()
        cutoff = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(now - self.claim_timeout_s))
        columns = ", ".join(ORIGINAL_COLUMNS)
        inner = ("SELECT id FROM recalls WHERE translated_at IS NULL "
                 "AND (translation_claimed_at IS NULL OR translation_claimed_at < ?)")
        params: list = [cutoff]
        if position is not None:
            inner += " AND (recall_date < ? OR (recall_date = ? AND id < ?))"
            params += [position[0], position[0], position[1]]
        inner += f" ORDER BY recall_date DESC, id DESC LIMIT ?{self.store.skip_locked}"
        sql = (f"UPDATE recalls SET translation_claimed_at = ?, translation_claimed_by = ? WHERE id IN ({inner}) "
               f"RETURNING id, recall_date, source_lang, {columns}")
        # One statement, atomic on both engines (autocommit): the claim needs no transaction
        # of its own, and a worker killed between claim and write leaves claims, not rows.
        rows = self.store.write_returning(sql, [stamp, self.claimer, *params, size])
        rows.sort(key=lambda r: (r["recall_date"], r["id"]), reverse=True)   # RETURNING has no order
        return rows

    def _release_dead_claims(self) -> None:
        """Claims of a worker that is gone (killed: its process, or on PostgreSQL its server
        session, no longer exists) return now rather than after the timeout."""
        claimers = [r["c"] for r in self.store.query(
            "SELECT DISTINCT translation_claimed_by AS c FROM recalls "
            "WHERE translated_at IS NULL AND translation_claimed_by IS NOT NULL")]
        dead = [c for c in claimers if not self.store.session_alive(c.split(" ")[0])]
        for claimer in dead:
            self.store.write(lambda db: db.conn.execute(
                "UPDATE recalls SET translation_claimed_at = NULL, translation_claimed_by = NULL "
                "WHERE translation_claimed_by = ?", [claimer]))
        if dead:
            log.warning("translate: took back the claims of %d worker(s) that died", len(dead))

    def _release_claims(self) -> None:
        """Give back rows claimed but not written (stopped by a down backend, Ctrl-C, a limit)."""
        try:
            self.store.write(lambda db: db.conn.execute(
                "UPDATE recalls SET translation_claimed_at = NULL, translation_claimed_by = NULL "
                "WHERE translation_claimed_by = ?", [self.claimer]))
        except Exception as exc:   # the claims then return after the timeout
            log.warning("translate: could not release claimed rows: %s", exc)

    # ---- translating one batch ----------------------------------------------------------
    def _translate_rows(self, rows: list[dict]):
        """(row outcomes, new memory entries, memory use counts) for one batch."""
        wanted: dict[tuple[str, str], None] = {}
        for row in rows:
            lang = _lang(row)
            for column in ORIGINAL_COLUMNS:
                if row[column]:
                    wanted[(lang, normalize_text(row[column]))] = None
        results = {key: self.seen[key] for key in wanted if key in self.seen}
        todo = [key for key in wanted if key not in results]
        results.update(self._from_memory(todo))
        new_memory: dict[str, dict[str, str]] = {}
        try:
            results.update(self._from_backend([k for k in todo if k not in results], new_memory))
        except BackendUnavailable:
            if new_memory:   # keep what this batch already paid for
                self.store.write(lambda db: self._remember(db, new_memory, {}))
            raise
        memory_uses: dict[str, dict[str, int]] = {}

        outcomes = []
        for row in rows:
            lang = _lang(row)
            outcome = _RowOutcome(row)
            notes, statuses = [], set()
            for name, original, korean in zip(TEXT_FIELDS, ORIGINAL_COLUMNS, KOREAN_COLUMNS):
                if not row[original]:
                    outcome.values[korean] = None
                    continue
                key = (lang, normalize_text(row[original]))
                result = results[key]
                # "local" results are codes / glossary terms kept as they are on purpose.
                echo = (guards.echo_in_descriptive_field(name, key[1], result.translation)
                        if result.origin != "local" else None)
                if echo:
                    outcome.values[korean] = None
                    statuses.add("blocked")
                    notes.append(f"{name}: {echo}")
                    continue
                outcome.values[korean] = result.translation
                if result.origin in ("blocked", "failed"):
                    statuses.add(result.origin)
                    notes.append(f"{name}: {result.note}")
                elif result.origin == "backend":
                    outcome.used_backend = True
                    results[key] = self.seen[key] = _Text(result.translation, "memory")   # later rows reuse it
                elif result.origin == "memory-db":
                    uses = memory_uses.setdefault(lang, {})
                    uses[key[1]] = uses.get(key[1], 0) + 1
            outcome.status = "failed" if "failed" in statuses else "blocked" if "blocked" in statuses else "translated"
            outcome.note = "; ".join(notes) or None
            outcomes.append(outcome)
        return outcomes, new_memory, memory_uses

    def _from_memory(self, keys) -> dict[tuple[str, str], _Text]:
        found: dict[tuple[str, str], _Text] = {}
        by_lang: dict[str, list[str]] = {}
        for lang, text in keys:
            if lang == self.target_lang:
                found[(lang, text)] = _Text(text, "local")
            else:
                by_lang.setdefault(lang, []).append(text)
        for lang, texts in by_lang.items():
            for text, translation in self.memory.lookup(lang, texts).items():
                # A glossary edited after this was remembered wins over the memory.
                if self.glossary and self.glossary.contradicted_by(text, translation, _glossary_lang(lang)):
                    continue
                found[(lang, text)] = _Text(translation, "memory-db")
        return found

    def _from_backend(self, keys, new_memory) -> dict[tuple[str, str], _Text]:
        results: dict[tuple[str, str], _Text] = {}
        to_send: dict[str, list[tuple[str, Masked]]] = {}
        for lang, text in keys:
            masked = mask(text, self.glossary, _glossary_lang(lang))
            if not masked.needs_backend:   # only codes, names, glossary terms and numbers
                results[(lang, text)] = _Text(unmask(masked.text, masked)[0], "local")
            else:
                to_send.setdefault(lang, []).append((text, masked))
        jobs = [(lang, chunk) for lang, items in to_send.items()
                for chunk in _chunks(items, self.backend.max_texts, self.backend.max_chars)]
        unavailable = None
        for (lang, chunk), outputs in zip(jobs, self._send_all(jobs)):
            if isinstance(outputs, BackendUnavailable):
                unavailable = unavailable or outputs
                continue
            for (text, masked), output in zip(chunk, outputs):
                result = self._judge(text, masked, output, lang)
                results[(lang, text)] = result
                if result.origin == "backend":
                    new_memory.setdefault(lang, {})[text] = result.translation
                else:
                    self.seen[(lang, text)] = result
        if unavailable:
            raise unavailable
        return results

    def _send_all(self, jobs):
        """Outputs per job, in order (or the BackendUnavailable it ended with); up to
        `backend.concurrency` requests in flight, because latency, not CPU, is the cost."""
        if self.pool is None or len(jobs) < 2:
            for lang, chunk in jobs:
                try:
                    yield self._send(chunk, lang)
                except BackendUnavailable as exc:
                    yield exc
                    return
            return
        futures = [self.pool.submit(self._send, chunk, lang) for lang, chunk in jobs]
        for future in futures:
            try:
                yield future.result()
            except BackendUnavailable as exc:
                yield exc

    def _send(self, chunk, lang: str) -> list[str | BackendItemError]:
        """Backend outputs for the chunk; a refused chunk is retried text by text so one bad
        text fails alone."""
        texts = [masked.text for _, masked in chunk]
        self._count_sent(len(texts))
        try:
            return self.backend.translate(texts, lang, self.target_lang)
        except BackendItemError as exc:
            if len(texts) == 1:
                return [exc]
            log.warning("%s; retrying its %d texts one by one", exc, len(texts))
        outputs: list[str | BackendItemError] = []
        for text in texts:
            self._count_sent(1)
            try:
                outputs.extend(self.backend.translate([text], lang, self.target_lang))
            except BackendItemError as exc:
                outputs.append(exc)
        return outputs

    def _count_sent(self, count: int) -> None:
        with self._lock:
            self.report.texts_sent += count

    def _judge(self, text: str, masked: Masked, output, lang: str) -> _Text:
        if isinstance(output, BackendItemError):
            return _Text(None, "failed", f"backend error: {output}")
        restored, lost = unmask(output, masked)
        restored = normalize_text(restored)
        reason = guards.check(text, restored, lang, protected=masked.slots, lost=lost, exempt=masked.replaced)
        if reason:
            log.warning("blocked a %s translation: %s", lang, reason)
            return _Text(None, "blocked", reason)
        return _Text(restored, "backend")

    # ---- writing --------------------------------------------------------------------------
    def _remember(self, db, new_memory, uses) -> None:
        for lang, entries in new_memory.items():
            self.memory.remember(db, lang, entries, self.backend.name)
        for lang, counts in uses.items():
            self.memory.count_uses(db, lang, counts)

    def _write(self, outcomes: list[_RowOutcome], new_memory, memory_uses) -> None:
        now = utc_now_iso()
        assignments = ", ".join(f"{c} = ?" for c in KOREAN_COLUMNS)
        unchanged = " AND ".join(f"{c} IS ?" for c in ORIGINAL_COLUMNS)
        sql = (f"UPDATE recalls SET {assignments}, translated_at = ?, translation_status = ?, translation_note = ?, "
               f"translation_claimed_at = NULL, translation_claimed_by = NULL "
               f"WHERE id = ? AND translated_at IS NULL AND {unchanged}")

        def op(db):
            self._remember(db, new_memory, memory_uses)
            written = []
            for outcome in outcomes:
                params = [outcome.values[c] for c in KOREAN_COLUMNS]
                params += [now, outcome.status, outcome.note, outcome.row["id"]]
                params += [outcome.row[c] for c in ORIGINAL_COLUMNS]
                written.append(db.conn.execute(sql, params).rowcount == 1)
            return written

        written = self.store.write(op)
        for outcome, ok in zip(outcomes, written):
            if not ok:
                self.report.skipped += 1
            elif outcome.status != "translated":
                setattr(self.report, outcome.status, getattr(self.report, outcome.status) + 1)
            elif outcome.used_backend:
                self.report.translated += 1
            else:
                self.report.from_memory += 1


def _lang(row: dict) -> str:
    return (row.get("source_lang") or "auto").lower()


def _glossary_lang(lang: str) -> str | None:
    return None if lang == "auto" else lang


def _chunks(items, max_texts: int, max_chars: int):
    chunk, size = [], 0
    for item in items:
        length = len(item[1].text)
        if chunk and (len(chunk) >= max_texts or size + length > max_chars):
            yield chunk
            chunk, size = [], 0
        chunk.append(item)
        size += length
    if chunk:
        yield chunk
