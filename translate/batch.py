"""Translating one batch of rows: every distinct original text of the batch answered once, from
this run's results, the translation memory, what needs no backend (codes, names, glossary
terms), or the backend (chunked, several requests in flight), each backend answer judged by
the guards; then every row's outcome (translated / blocked / failed) from its texts'. Writing
the batch is the worker's (translate/worker.py)."""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from . import guards
from .backends import Backend
from .errors import BackendItemError, BackendUnavailable
from .glossary import Glossary
from .memory import TranslationMemory, normalize_text
from .protect import Masked, mask, unmask
from .sending import DaemonPool, Stopped, wait_for
from .targets import Target

log = logging.getLogger("translate.worker")   # the worker's logger, as before the split


@dataclass
class TextOutcome:
    """The outcome for one distinct (language, normalised text)."""

    translation: str | None = None
    # backend (new this batch) | memory (seen earlier this run) | memory-db (the memory table)
    # | local (nothing to send: codes, names, glossary terms) | blocked | failed
    origin: str = "backend"
    note: str | None = None


@dataclass
class RowOutcome:
    row: dict
    values: dict = field(default_factory=dict)   # korean column → text or None
    status: str = "translated"
    note: str | None = None
    used_backend: bool = False


class BatchTranslator:
    """The texts of batches to translations, for one run: remembers this run's outcomes (so
    nothing is sent twice) and counts the texts it sends into `report`. `pool` and `stop` are
    the run's (set by the worker when it starts)."""

    def __init__(self, store, backend: Backend, *, glossary: Glossary | None, target_lang: str, report):
        self.store = store
        self.backend = backend
        self.glossary = glossary
        self.target_lang = target_lang
        self.memory = TranslationMemory(store, target_lang)
        self.seen: dict[tuple[str, str], TextOutcome] = {}   # this run's outcomes, so nothing is sent twice
        self.report = report
        self.pool: DaemonPool | None = None
        self.stop = None
        self._lock = threading.Lock()

    def translate_rows(self, target: Target, rows: list[dict]):
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
                self.store.write(lambda db: self.remember(db, new_memory, {}))
            raise
        memory_uses: dict[str, dict[str, int]] = {}

        outcomes = []
        for row in rows:
            lang = _lang(row)
            outcome = RowOutcome(row)
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
                    results[key] = self.seen[key] = TextOutcome(result.translation, "memory")   # later rows reuse it
                elif result.origin == "memory-db":
                    uses = memory_uses.setdefault(lang, {})
                    uses[key[1]] = uses.get(key[1], 0) + 1
            outcome.status = "failed" if "failed" in statuses else "blocked" if "blocked" in statuses else "translated"
            outcome.note = "; ".join(notes) or None
            outcomes.append(outcome)
        return outcomes, new_memory, memory_uses

    def _from_memory(self, keys) -> dict[tuple[str, str], TextOutcome]:
        found: dict[tuple[str, str], TextOutcome] = {}
        by_lang: dict[str, list[str]] = {}
        for lang, text in keys:
            if lang == self.target_lang:
                found[(lang, text)] = TextOutcome(text, "local")
            else:
                by_lang.setdefault(lang, []).append(text)
        for lang, texts in by_lang.items():
            for text, translation in self.memory.lookup(lang, texts).items():
                # A glossary edited after this was remembered wins over the memory.
                if self.glossary and self.glossary.contradicted_by(text, translation, _glossary_lang(lang)):
                    continue
                found[(lang, text)] = TextOutcome(translation, "memory-db")
        return found

    def _from_backend(self, keys, new_memory) -> dict[tuple[str, str], TextOutcome]:
        results: dict[tuple[str, str], TextOutcome] = {}
        to_send: dict[str, list[tuple[str, Masked]]] = {}
        for lang, text in keys:
            masked = mask(text, self.glossary, _glossary_lang(lang))
            if not masked.needs_backend:   # only codes, names, glossary terms and numbers
                results[(lang, text)] = TextOutcome(unmask(masked.text, masked)[0], "local")
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

    def _judge(self, text: str, masked: Masked, output, lang: str) -> TextOutcome:
        if isinstance(output, BackendItemError):
            return TextOutcome(None, "failed", f"backend error: {output}")
        restored, lost = unmask(output, masked)
        restored = normalize_text(restored)
        reason = guards.check(text, restored, lang, protected=masked.slots, lost=lost, exempt=masked.replaced)
        if reason:
            log.warning("blocked a %s translation: %s", lang, reason)
            return TextOutcome(None, "blocked", reason)
        return TextOutcome(restored, "backend")

    def remember(self, db, new_memory, uses) -> None:
        """Write this batch's new translations and memory uses in the transaction `db`."""
        self.memory.write(db, new_memory, uses, self.backend.name)


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
