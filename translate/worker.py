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

This module is the loop, the claims and the writes; translating one batch's texts is
translate/batch.py.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

from basecrawler.formats.dates import utc_now_iso
from basecrawler.store.engines.dialect import dialect_of

from .backends import CONFIGURE_HELP, Backend
from .batch import BatchTranslator, RowOutcome
from .claims import Claims
from .errors import BackendUnavailable, NoBackendConfigured
from .glossary import Glossary, glossary_from_env
from .originals import settle_originals
from .sending import DaemonPool, Stopped
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


def requeue(store, statuses) -> int:
    """Put rows with these translation statuses back in the queue; returns how many."""
    statuses = [statuses] if isinstance(statuses, str) else list(statuses)
    unknown = [s for s in statuses if s not in RETRYABLE_STATUSES]
    if unknown:
        raise ValueError(f"can only retry {' or '.join(RETRYABLE_STATUSES)}, not {unknown[0]!r}")
    d = dialect_of(store)
    return store.write(lambda db: sum(db.conn.execute(d.write(
        f"UPDATE {target.table} SET translated_at = NULL, translation_status = NULL, translation_note = NULL "
        f"WHERE translated_at IS NOT NULL AND translation_status IN ({d.params(len(statuses))})"), statuses).rowcount
        for target in translation_targets(store)))


def count_pending(store) -> int:
    """Rows waiting for translation, over every translated type."""
    return sum(pending_by_type(store).values())


def pending_by_type(store) -> dict[str, int]:
    d = dialect_of(store)
    return {target.name: store.scalar(d.query(f"SELECT COUNT(*) FROM {target.table} WHERE translated_at IS NULL"))
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
        self.report = TranslationReport(backend=backend.name)
        self.batch = BatchTranslator(store, backend, glossary=glossary, target_lang=target_lang, report=self.report)
        self.stop = None
        self.claims = Claims(store)

    # ---- the loop ---------------------------------------------------------------------
    def run(self, *, limit, retry, progress, batch_rows, stop=None) -> TranslationReport:
        started = time.monotonic()
        calls_before = self.backend.calls
        report = self.report
        self.stop = self.batch.stop = stop
        if retry:
            report.requeued = requeue(self.store, retry)
            log.info("re-queued %d %s rows", report.requeued, "/".join([retry] if isinstance(retry, str) else retry))
        queues = [_Queue(target) for target in translation_targets(self.store)]
        total = count_pending(self.store)
        if limit is not None:
            total = min(total, limit)
        done = 0
        turn = 0
        self.batch.pool = DaemonPool(max(1, int(getattr(self.backend, "concurrency", 1))))
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
                outcomes, new_memory, memory_uses = self.batch.translate_rows(queue.target, rows)
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
            self.batch.pool.shutdown()
            self.claims.stop_keeping()
            self.claims.release()
            report.backend_calls = self.backend.calls - calls_before
            report.pending = count_pending(self.store)
            report.duration_s = time.monotonic() - started
        return report

    def _stopping(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    # ---- writing one batch ------------------------------------------------------------------
    def _write(self, target: Target, outcomes: list[RowOutcome], new_memory, memory_uses) -> None:
        now = utc_now_iso()
        d = dialect_of(self.store)
        assignments = ", ".join(f"{c} = {d.p}" for c in target.koreans)
        # (null-safe: an original that is NULL is unchanged when it is still NULL)
        unchanged = " AND ".join(f"{c} {d.is_} {d.p}" for c in target.originals)
        sql = d.write(f"UPDATE {target.table} SET {assignments}, translated_at = {d.p}, translation_status = {d.p}, "
                      f"translation_note = {d.p} WHERE id = {d.p} AND translated_at IS NULL AND {unchanged}")

        def op(db):
            # Memory rows first (in one fixed order, see memory.write), the batch's own rows
            # after: two workers' transactions then never wait on each other in a circle.
            self.batch.remember(db, new_memory, memory_uses)
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
