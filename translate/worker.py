"""The translation worker: fills the `_ko` columns of rows `WHERE translated_at IS NULL`, in
every record type's table that declares translated fields (translate/targets.py).

Newest first within a type, in batches, the types taking turns batch by batch so one type's
backlog never starves another. Resumable at any moment: a batch is written in one
transaction that stamps `translated_at` together with the `_ko` fields, and a row is written
only if its `translated_at` is still NULL and its originals are the ones that were translated.
A killed worker therefore loses at most the batch in flight and never writes a row twice; a
crawl that changes an original while the batch is in flight leaves that row pending.

Several workers may share one store (on PostgreSQL, on several machines): each batch is claimed
first (translate/claims.py), so no two workers send the same row to a backend. A worker
releases its unfinished claims when it stops; running workers take back the claims of one that
was killed (its pid gone on this host) or stopped renewing its lease (any host) before each
batch. A `stop` event (SIGTERM) ends the run within a fraction of a second, even mid-request:
the batch in flight is dropped, its claims released.

Outcomes per row (`translation_status`):
- translated  every text translated (or reused from memory) and accepted by the guards;
- blocked     a guard rejected a text: its `_ko` stays empty, the reason is in translation_note;
- failed      the backend failed on this record's text alone;
- (pending)   the backend is down / rate-limited / out of quota: the run stops, nothing stamped.
`translate_pending(..., retry="failed"|"blocked")` puts such rows back in the queue first.

Rows whose source language is the target language (any source whose `source_lang` is "ko":
Korea's own publishers) are never sent: `settle_originals` copies their originals into the
`_ko` fields and stamps them translated, with or without a backend, before any batch.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field

from basecrawler.formats.dates import utc_now_iso

from . import guards
from .backends import CONFIGURE_HELP, Backend
from .claims import Claims
from .errors import BackendItemError, BackendUnavailable, NoBackendConfigured
from .glossary import Glossary, glossary_from_env
from .memory import TranslationMemory, normalize_text
from .originals import settle_originals
from .protect import Masked, mask, unmask
from .sending import DaemonPool, Stopped, wait_for
from .targets import Target, translation_targets

log = logging.getLogger(__name__)

DEFAULT_BATCH_ROWS = 100
RETRYABLE_STATUSES = ("failed", "blocked")


@dataclass
class TranslationReport:
    """Row counts of one worker run (translated and from_memory are disjoint)."""

    translated: int = 0      # rows that needed at least one new backend translation
    from_memory: int = 0     # rows served entirely by memory, glossary or protected terms
    originals: int = 0       # rows already in the target language: their originals are the Korean
    blocked: int = 0
    failed: int = 0
    pending: int = 0         # rows still waiting when the run ended
    backend_down: bool = False
    stopped: bool = False    # the stop event (SIGTERM / Ctrl-C) ended the run
    skipped: int = 0         # changed by a crawl (or done by another worker) while in flight
    requeued: int = 0
    backend_calls: int = 0
    texts_sent: int = 0
    backend: str = ""
    error: str | None = None
    duration_s: float = 0.0

    @property
    def processed(self) -> int:
        return self.translated + self.from_memory + self.originals + self.blocked + self.failed

    def summary_line(self) -> str:
        line = f"translate: translated {self.translated}, from memory {self.from_memory}, "
        if self.originals:
            line += f"already Korean {self.originals}, "
        line += f"blocked {self.blocked}, failed {self.failed}, pending {self.pending}"
        if self.skipped:
            line += f", changed in flight {self.skipped}"
        line += f" [{self.backend or 'no backend'}: {self.backend_calls} calls, {self.texts_sent} texts, {self.duration_s:.1f}s]"
        if self.backend_down:
            line += f" stopped: {self.error}"
        elif self.stopped:
            line += " stopped on request"
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
    return store.write(lambda db: sum(db.conn.execute(
        f"UPDATE {target.table} SET translated_at = NULL, translation_status = NULL, translation_note = NULL "
        f"WHERE translated_at IS NOT NULL AND translation_status IN ({marks})", statuses).rowcount
        for target in translation_targets(store)))


def count_pending(store) -> int:
    """Rows waiting for translation, over every translated type."""
    return sum(pending_by_type(store).values())


def pending_by_type(store) -> dict[str, int]:
    return {target.name: store.scalar(f"SELECT COUNT(*) FROM {target.table} WHERE translated_at IS NULL")
            for target in translation_targets(store)}


def translate_pending(store, backend: Backend | None, *, limit: int | None = None, retry=None, progress=None,
                      glossary: Glossary | None = None, batch_rows: int | None = None,
                      target_lang: str = "ko", stop=None) -> TranslationReport:
    """Translate pending rows until none are left or `limit` rows were processed.

    `retry` ("failed", "blocked" or both) re-queues those rows first. `progress(done, total)`
    is called after each batch. Without `glossary` / `batch_rows` the environment decides
    (BASECRAWLER_GLOSSARY, BASECRAWLER_TRANSLATE_BATCH), so a scheduled run behaves like the
    command. Rows already in `target_lang` are settled first (settle_originals), also when
    `backend` is None; then NoBackendConfigured is raised if anything else is pending.
    """
    originals = settle_originals(store, target_lang)
    if backend is None:
        raise NoBackendConfigured(CONFIGURE_HELP)
    if glossary is None:
        glossary = glossary_from_env()
    if batch_rows is None:
        batch_rows = int(os.environ.get("BASECRAWLER_TRANSLATE_BATCH") or DEFAULT_BATCH_ROWS)
    report = _Worker(store, backend, glossary=glossary, target_lang=target_lang).run(
        limit=limit, retry=retry, progress=progress, batch_rows=batch_rows, stop=stop)
    report.originals += originals
    return report


class _Queue:
    """One type's place in the round: where its newest-first cursor is, whether it ran dry."""

    def __init__(self, target: Target):
        self.target = target
        self.position = None
        self.empty = False


class _Worker:
    def __init__(self, store, backend: Backend, *, glossary: Glossary | None, target_lang: str):
        self.store = store
        self.backend = backend
        self.glossary = glossary
        self.target_lang = target_lang
        self.memory = TranslationMemory(store, target_lang)
        self.seen: dict[tuple[str, str], _Text] = {}   # this run's outcomes, so nothing is sent twice
        self.report = TranslationReport(backend=backend.name)
        self.pool: DaemonPool | None = None
        self.stop = None
        self._lock = threading.Lock()
        self.claims = Claims(store)

    # ---- the loop ---------------------------------------------------------------------
    def run(self, *, limit, retry, progress, batch_rows, stop=None) -> TranslationReport:
        started = time.monotonic()
        calls_before = self.backend.calls
        report = self.report
        self.stop = stop
        if retry:
            report.requeued = requeue(self.store, retry)
            log.info("re-queued %d %s rows", report.requeued, "/".join([retry] if isinstance(retry, str) else retry))
        queues = [_Queue(target) for target in translation_targets(self.store)]
        total = count_pending(self.store)
        if limit is not None:
            total = min(total, limit)
        done = 0
        turn = 0
        self.pool = DaemonPool(max(1, int(getattr(self.backend, "concurrency", 1))))
        self.claims.keep_alive()
        try:
            while (limit is None or done < limit) and not self._stopping():
                if self.claims.reclaim_dead():
                    for queue in queues:   # the rows taken back may lie behind a cursor
                        queue.position, queue.empty = None, False
                waiting = [q for q in queues if not q.empty]
                if not waiting:
                    break
                queue = waiting[turn % len(waiting)]   # the types take turns, batch by batch
                turn += 1
                size = batch_rows if limit is None else min(batch_rows, limit - done)
                rows = self.claims.claim(queue.target, queue.position, size)
                if not rows:
                    queue.empty = True
                    continue
                queue.position = (rows[-1]["sort_key"], rows[-1]["id"])
                outcomes, new_memory, memory_uses = self._translate_rows(queue.target, rows)
                self._write(queue.target, outcomes, new_memory, memory_uses)
                done += len(rows)
                if progress:
                    progress(done, total)
                elif done // batch_rows % 10 == 0:
                    log.info("translate: %d/%d rows", done, total)
            report.stopped = report.stopped or self._stopping()
        except BackendUnavailable as exc:
            report.backend_down = True
            report.error = str(exc)
            log.error("translation stopped, rows stay pending: %s", exc)
        except Stopped:
            report.stopped = True
            log.warning("translate: stop requested; the batch in flight stays pending")
        finally:
            # Requests still in flight run on daemon threads: their answers are dropped and
            # they never hold the process open.
            self.pool.shutdown()
            self.claims.stop_keeping()
            self.claims.release()
            report.backend_calls = self.backend.calls - calls_before
            report.pending = count_pending(self.store)
            report.duration_s = time.monotonic() - started
        return report

    def _stopping(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    # ---- translating one batch ----------------------------------------------------------
    def _translate_rows(self, target: Target, rows: list[dict]):
        """(row outcomes, new memory entries, memory use counts) for one batch."""
        wanted: dict[tuple[str, str], None] = {}
        for row in rows:
            lang = _lang(row)
            for column in target.originals:
                if row[column]:
                    wanted[(lang, normalize_text(row[column]))] = None
        results = {key: self.seen[key] for key in wanted if key in self.seen}
        todo = [key for key in wanted if key not in results]
        results.update(self._from_memory(todo))
        new_memory: dict[str, dict[str, str]] = {}
        try:
            results.update(self._from_backend([k for k in todo if k not in results], new_memory))
        except (BackendUnavailable, Stopped):
            if new_memory:   # keep what this batch already paid for
                self.store.write(lambda db: self._remember(db, new_memory, {}))
            raise
        memory_uses: dict[str, dict[str, int]] = {}

        outcomes = []
        for row in rows:
            lang = _lang(row)
            outcome = _RowOutcome(row)
            notes, statuses = [], set()
            for name, original, korean in zip(target.fields, target.originals, target.koreans):
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
        `backend.concurrency` requests in flight, because latency, not CPU, is the cost.
        Raises Stopped as soon as `stop` is set, without waiting for requests in flight."""
        if self.pool.size == 1:   # one at a time: after a down backend, send nothing more
            for lang, chunk in jobs:
                try:
                    yield wait_for(self.pool.submit(self._send, chunk, lang), self.stop)
                except BackendUnavailable as exc:
                    yield exc
                    return
            return
        futures = [self.pool.submit(self._send, chunk, lang) for lang, chunk in jobs]
        try:
            for future in futures:
                try:
                    yield wait_for(future, self.stop)
                except BackendUnavailable as exc:
                    yield exc
        finally:
            for future in futures:
                future.cancel()

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
        self.memory.write(db, new_memory, uses, self.backend.name)

    def _write(self, target: Target, outcomes: list[_RowOutcome], new_memory, memory_uses) -> None:
        now = utc_now_iso()
        assignments = ", ".join(f"{c} = ?" for c in target.koreans)
        unchanged = " AND ".join(f"{c} IS ?" for c in target.originals)
        sql = (f"UPDATE {target.table} SET {assignments}, translated_at = ?, translation_status = ?, "
               f"translation_note = ? WHERE id = ? AND translated_at IS NULL AND {unchanged}")

        def op(db):
            # Memory rows first (in one fixed order, see memory.write), the batch's own rows
            # after: two workers' transactions then never wait on each other in a circle.
            self._remember(db, new_memory, memory_uses)
            written = []
            for outcome in sorted(outcomes, key=lambda o: o.row["id"]):
                params = [outcome.values[c] for c in target.koreans]
                params += [now, outcome.status, outcome.note, outcome.row["id"]]
                params += [outcome.row[c] for c in target.originals]
                written.append((outcome, db.conn.execute(sql, params).rowcount == 1))
            self.claims.done(db, target, [o.row["id"] for o in outcomes])
            return written

        written = self.store.write(op)
        for outcome, ok in written:
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
