"""The store side of the pipeline's intake (intake.py): a type's batch of prepared records
written (`Store.upsert`, its commit finishing behind), and counted by what the store said; a
record the store cannot even serialise is found by writing the batch again one by one, and is
one dead letter."""
from __future__ import annotations

import logging
from collections import Counter
from concurrent.futures import Future
from typing import Any

from pydantic import BaseModel

from basecrawler.recordtypes import RecordType

log = logging.getLogger("basecrawler")


class Storing:
    """One run's writes: how it counted every key it stored (`stored_keys`, by type name),
    and the batch last stored while its commit finishes behind, with the counts it added."""

    def __init__(self, crawler: Any):
        self.crawler = crawler
        self.stored_keys: dict[str, dict[tuple, str]] = {}   # type name → key → how this run counted it
        self._finishing: tuple[Future, dict[str, int]] | None = None

    def store_batch(self, record_type: RecordType, batch: list[tuple[BaseModel, Any, str | None]],
                    unstored: bool = False) -> None:
        """`unstored`: no stored row has any of the batch's keys (`Store.upsert`; the intake knows)."""
        if not batch:
            return
        crawler = self.crawler
        self.confirm()
        try:
            self._store(record_type, batch, behind=True, unstored=unstored)
        except _RECORD_FAULTS as exc:
            # One record the store cannot even serialise (its row, its hash) refuses the whole
            # batch before anything is written: each record again on its own, so exactly that
            # one is a dead letter and the run goes on. (A database failure is not one of these.)
            log.warning("%s: a batch of %d %s records was refused (%s: %.200s); storing them one by one",
                        crawler.source, len(batch), record_type.name, type(exc).__name__, exc)
            for one in batch:
                try:
                    self._store(record_type, [one], behind=False)
                except _RECORD_FAULTS as error:
                    record, raw, _ = one
                    crawler.counts.store_failed += 1
                    crawler.dead_letter(raw, error, stage="store", kind="store_error", record_type=record_type.name,
                                        key=_safe_key(record_type, record))

    def _store(self, record_type: RecordType, batch: list[tuple[BaseModel, Any, str | None]], *, behind: bool,
               unstored: bool = False) -> None:
        crawler, counts = self.crawler, self.crawler.counts
        records, raws, input_hashes = zip(*batch)   # (each a tuple, in batch order)
        before = _stored_tally(counts)
        # The batch's index feed and commit finish behind us while we make the next batch
        # (store/finishing.py); its counts stand once it is confirmed stored.
        outcome = crawler.store.upsert(record_type, records, source=crawler.source, raws=raws,
                                       input_hashes=input_hashes, behind=behind, unstored=unstored)
        counts.merged += outcome.merged  # same key twice in this batch: folded into one row
        self._count_stored(record_type, outcome.by_key)
        if outcome.finishing is not None:
            after = _stored_tally(counts)
            self._finishing = (outcome.finishing, {name: after[name] - before[name] for name in after})
        for row, error in outcome.failed:
            counts.store_failed += 1
            # The letter's key column holds the last key field (the publisher's number).
            crawler.dead_letter(row.get("_raw"), error, stage="store", kind="store_error", record_type=record_type.name,
                                key=row.get(record_type.key[-1]))
        if crawler.has_detail_phase() and record_type.name == crawler.record_type:
            from basecrawler.pipeline import enrichment

            enrichment.enqueue(crawler, records, failed=[row for row, _ in outcome.failed])

    def confirm(self, *, raise_failure: bool = True) -> None:
        """Wait until the batch last stored is committed. If it was not (its finishing failed,
        e.g. on a full disk, and it was rolled back whole), its records' counts are taken
        back, so the run's counts say what the database holds, and the failure is raised."""
        if self._finishing is None:
            return
        (finishing, counted), self._finishing = self._finishing, None
        try:
            finishing.result()
        except Exception:
            counts = self.crawler.counts
            for name, added in counted.items():
                setattr(counts, name, getattr(counts, name) - added)
            if raise_failure:
                raise

    def count(self, record_type: RecordType, key: tuple, what: str) -> None:
        """One stored record: new, updated or unchanged (see `_count_stored`)."""
        self._count_stored(record_type, {key: what})

    def _count_stored(self, record_type: RecordType, by_key: dict[tuple, str]) -> None:
        """A batch's stored records, each new, updated or unchanged; a key this run already
        counted is merged, and a record it counted unchanged that a later input of the run
        changed counts as updated (whichever batch or lookup round each fell in)."""
        counts = self.crawler.counts
        seen = self.stored_keys.get(record_type.name)
        if seen is None:
            seen = self.stored_keys[record_type.name] = {}
        tally = {"new": 0, "updated": 0, "unchanged": 0}
        if seen.keys().isdisjoint(by_key):   # the usual batch: no key this run counted before (told in C)
            seen.update(by_key)
            tally.update(Counter(by_key.values()))
            by_key = {}
        for key, what in by_key.items():
            earlier = seen.get(key)
            if earlier is None:
                seen[key] = what
                tally[what] += 1
                continue
            counts.merged += 1   # same key already stored by an earlier batch of this run
            if earlier == "unchanged" and what != "unchanged":
                tally["unchanged"] -= 1
                tally["updated"] += 1
                seen[key] = "updated"
        for what, added in tally.items():
            if added:
                setattr(counts, what, getattr(counts, what) + added)
        # (A key met again only moves from unchanged to updated, or is merged: saved once.)
        counts.saved += tally["new"] + tally["unchanged"] + tally["updated"]


# What a record the store cannot serialise raises (a value nested past the interpreter's
# recursion, a type JSON cannot write): the record's fault, never the database's.
_RECORD_FAULTS = (RecursionError, ValueError, TypeError, OverflowError)


def _safe_key(record_type: RecordType, record: BaseModel) -> str | None:
    value = record.__dict__.get(record_type.key[-1])
    return value if value is None or value.__class__ is str else str(value)[:200]


# The counts storing a batch moves (count(), and `merged` for keys folded in the batch).
_STORED_COUNTS = ("saved", "new", "updated", "unchanged", "merged")


def _stored_tally(counts) -> dict[str, int]:
    return {name: getattr(counts, name) for name in _STORED_COUNTS}


__all__ = ["Storing"]
