"""Between parse() and the store: the records of the items parsed since the last commit, made,
counted and batched per type in item order.

Each fetched item is parsed at once (a failing parse() is its dead letter at once); its records
wait, as typed entries with their input hashes (inputhash.py), until a round of them is looked
up together, by their key as parse() gave it. A record whose input hash is the one its stored
row was last written from is **unchanged without being validated, prepared or compared** (issue #23.3: a re-run of unchanged
data costs parse() and one indexed lookup per 500 records); its stored date still decides the
window, so the counts are the ones the whole way would give. Everything else is validated,
prepared, windowed and batched as before. A recognised record whose key is also in a record
waiting to be stored goes the whole way too, so the batch folds them as it always did.

The crawler (crawler.py) decides when to flush; `flush()` stores the batches and counts what the
store said (storing.py).
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from operator import attrgetter
from types import SimpleNamespace
from typing import Any, Callable

from pydantic import BaseModel, ValidationError

from basecrawler.errors import OverLimit, Skip
from basecrawler.formats.jsonlimits import Refused
from basecrawler.pipeline import deadletters
from basecrawler.pipeline.inputhash import DATE_KNOWN, EntryMaker, hash_context, stored_input_hash
from basecrawler.pipeline.recordlimits import check_containers
from basecrawler.pipeline.records import Entry, Raw, Window, as_date, entries, in_window, prepare, validate
from basecrawler.pipeline.storing import Storing
from basecrawler.recordtypes import RecordType


log = logging.getLogger("basecrawler")
_NOTHING: dict = {}
# Entries looked up by input hash together: one indexed query per this many records.
LOOKUP_EVERY = 500


@dataclass(slots=True)
class _Parsed:
    item: Any                   # as fetched (a `Raw`): a dead letter keeps it
    entries: list[Entry]
    beyond_window: bool         # the ledger's verdict when the item was parsed


class Intake:
    def __init__(self, crawler: Any, window: Window):
        self.crawler = crawler
        self.window = window
        self.parsed: list[_Parsed] = []
        self.parsed_entries = 0
        # type name → (the type, its records waiting to be stored: (record, raw, input hash))
        self.batches: dict[str, tuple[RecordType, list[tuple[BaseModel, Any, str | None]]]] = {}
        self.batched = 0
        self.batched_bytes = 0   # the batched records' input size (Entry.size) …
        self.parsed_bytes = 0    # … and the parsed ones' not yet resolved (`batch_full`)
        self._batched_keys: dict[str, set[tuple]] = {}   # type name → keys waiting in `batches`
        self._recognised_for_detail: list[SimpleNamespace] = []
        self.storing = Storing(crawler)   # writes the batches and counts what the store said
        self._contexts: dict[str, str] = {}   # by type name
        self._fresh: dict[str, bool] = {}   # type name → no stored row of it from this source at first sight
        # Fixed for the run: asked once, not per item.
        self._default_type = crawler.default_type()
        self._defaults = tuple(crawler.record_defaults().items())
        self._today = None   # per lookup round: a run may cross midnight
        self._windowed = window.since is not None or window.until is not None
        self._maker = EntryMaker(crawler.source, self._defaults, self._context)
        self._parse = raw_parser(crawler)
        self._public_url = crawler.public_url if crawler.overridden_bases() else None
        self._moved_from = tuple(transport for transport, _ in crawler.overridden_bases())

    # ---- parse ----------------------------------------------------------------------------
    def parse_item(self, item: Any) -> None:
        """parse() one fetched item; its records wait for the next lookup round."""
        crawler, counts = self.crawler, self.crawler.counts
        raw = item.data if isinstance(item, Raw) else item
        if raw.__class__ is Refused:   # an item a reader refused over a structural limit
            self._unparseable(Raw(raw.summary(), getattr(item, "url", None), getattr(item, "response_sha256", None)),
                              raw.error)
            return
        letters_before = counts.dead_lettered
        try:
            produced = self._parse(raw)
            # (the usual item, one dict of the default type: `entries`' first case, without its call)
            made = ([self._maker.entry(self._default_type, produced)] if produced.__class__ is dict else
                    entries(produced, default_type=self._default_type, defaults=self._defaults, maker=self._maker))
        except Skip as skip:
            counts.skip(skip.reason)
            log.debug("%s: item skipped: %s", crawler.source, skip.reason)
            return
        except Exception as exc:
            self._unparseable(item, exc)
            return
        if not made:
            if counts.dead_lettered > letters_before:
                counts.unparseable += 1  # parse() kept its parts as dead letters itself
            else:
                counts.skip("no record")  # parse() returned nothing and said nothing
            return
        ledger = crawler.ledger_in_use()
        self.parsed.append(_Parsed(item, made, ledger is not None and ledger.beyond_window))
        self.parsed_entries += len(made)
        self.parsed_bytes += made[0].size if len(made) == 1 else sum(entry.size for entry in made)
        if self.parsed_entries >= LOOKUP_EVERY:
            self.resolve()

    def _context(self, record_type: RecordType) -> str:
        context = self._contexts.get(record_type.name)
        if context is None:
            context = self._contexts[record_type.name] = hash_context(record_type, self.crawler.source,
                                                                      self.crawler.overridden_bases())
        return context

    def _unparseable(self, item: Any, exc: Exception) -> None:
        self.crawler.counts.unparseable += 1
        if isinstance(exc, ValidationError):
            self.crawler.dead_letter(item, deadletters.short_validation(exc), stage="parse", kind="validation")
        elif isinstance(exc, OverLimit):   # too deep / too many / too long: a kind of its own
            self.crawler.dead_letter(item, exc, stage="parse", kind=exc.kind)
        else:
            self.crawler.dead_letter(item, exc, stage="parse", kind="parse_error")

    # ---- recognise, validate, window, batch -----------------------------------------------
    def resolve(self) -> None:
        """The parsed items' records: recognised ones counted, the rest validated and batched."""
        parsed, self.parsed, self.parsed_entries, self.parsed_bytes = self.parsed, [], 0, 0
        if not parsed:
            return
        self._today = self.crawler.today()
        known = self._known(parsed)
        if not known:   # nothing stored to recognise (a first import): each item the whole way
            self._resolve_unknown(parsed)
            return
        counts = self.crawler.counts
        made_items = []
        hits: list[tuple[Entry, tuple, bool]] = []   # the recognised records, in order
        validated = False
        for item in parsed:
            mark = len(hits)
            try:   # an item whose record fails validation is one dead letter, whole
                made = []
                for entry in item.entries:
                    # The stored row made from this very input (and code): its stored value
                    # is the input hash and one letter (records.stored_input_hash).
                    hit = known.get(entry.record_type.name, _NOTHING).get(entry.raw_key)
                    if hit is not None and hit[0] is not None and hit[0][:-1] == entry.input_hash:
                        made.append((entry, hit, None))
                        hits.append((entry, hit, item.beyond_window))
                    else:
                        validated = True
                        made.append((entry, None, validate(entry)))
            except Exception as exc:
                del hits[mark:]
                self._unparseable(item.item, exc)
                continue
            made_items.append((item, made))
        batched = self._batched_keys
        if not validated and not batched:   # a re-run's round: every record recognised, none waiting
            self._count_recognised(hits)
            return
        recognised = bool(hits)
        # Keys about to be written: a recognised record sharing one goes the whole way (only
        # asked when the round recognised any: never on a first run).
        round_keys: dict[str, set[tuple]] = {}
        if recognised:
            for _, made in made_items:
                for entry, _, record in made:
                    if record is not None:
                        round_keys.setdefault(entry.record_type.name, set()).add(_key_of(entry.record_type, record,
                                                                                         self.crawler.source))

        def waiting(entry: Entry) -> bool:
            name = entry.record_type.name
            return entry.raw_key in batched.get(name, _NOTHING) or entry.raw_key in round_keys.get(name, _NOTHING)

        for item, made in made_items:
            if recognised and (round_keys or batched):
                try:
                    made = [(entry, hit, record) if hit is None or not waiting(entry)
                            else (entry, None, validate(entry)) for entry, hit, record in made]
                except Exception as exc:
                    self._unparseable(item.item, exc)
                    continue
            try:   # everything up to the batch is inside the item's boundary (RecursionError too)
                ready = [(entry, hit, record if hit is not None else self._prepared(entry, record))
                         for entry, hit, record in made]
            except Exception as exc:
                self._unparseable(item.item, exc)
                continue
            raw = item.item.data if isinstance(item.item, Raw) else item.item
            for entry, hit, record in ready:
                if hit is not None:
                    self._count_recognised([(entry, hit, item.beyond_window)])
                else:
                    counts.parsed += 1
                    self._add(entry, record, item, raw)

    def _resolve_unknown(self, parsed: list[_Parsed]) -> None:
        """`resolve` of a round none of whose records is stored: validated, prepared and batched,
        item by item."""
        counts, prepared, add = self.crawler.counts, self._prepared, self._add
        for item in parsed:
            try:   # (an item whose record fails is one dead letter, whole: RecursionError too)
                records = [prepared(entry, validate(entry)) for entry in item.entries]
            except Exception as exc:
                self._unparseable(item.item, exc)
                continue
            raw = item.item.data if isinstance(item.item, Raw) else item.item
            counts.parsed += len(records)
            for entry, record in zip(item.entries, records):
                add(entry, record, item, raw)

    def _known(self, parsed: list[_Parsed]) -> dict[str, dict[tuple, tuple]]:
        """(input hash, date) of the stored rows at the raw keys of the parsed entries, by
        type name (one keyed query per 500 keys); the date only when the window has an end.
        Not asked for a type of which the store held no row from this source when the run
        first met it (`_nothing_stored`)."""
        wanted: dict[str, tuple[RecordType, set[tuple]]] = {}
        fresh = self._fresh
        for item in parsed:
            for entry in item.entries:
                if entry.raw_key is not None:
                    keys = wanted.get(entry.record_type.name)
                    if keys is None:
                        if fresh.get(entry.record_type.name) or self._nothing_stored(entry.record_type):
                            continue
                        keys = wanted[entry.record_type.name] = (entry.record_type, set())
                    keys[1].add(entry.raw_key)
        store, dates = self.crawler.store, self._windowed
        return {name: store.lookup.known_inputs(record_type, keys, dates) for name, (record_type, keys) in wanted.items()}

    def _nothing_stored(self, record_type: RecordType) -> bool:
        """Whether the store held no record of this type from this source when the run first
        met the type (before any of its records was batched). Then every stored row the lookup
        could find was written by this run, under the run lock: a record repeating one goes the
        whole way instead, and the store's verdict (unchanged) is counted merged, as the
        recognised record would have been. A first import asks nothing per 500 records."""
        fresh = self._fresh.get(record_type.name)
        if fresh is None:
            fresh = self._fresh[record_type.name] = self.crawler.store.lookup.count(record_type, self.crawler.source) == 0
        return fresh

    def _unstored(self, name: str) -> bool:
        """Whether no stored row has a key of the type's batch: the store held none of the type
        from this source when the run first met it (`_nothing_stored`, under the run lock), and
        this run stored none of these keys since. The store then does not look them up."""
        return bool(self._fresh.get(name)) and self.storing.stored_keys.get(name, _NOTHING).keys().isdisjoint(
            self._batched_keys[name])

    def _count_recognised(self, recognised: list[tuple[Entry, tuple, bool]]) -> None:
        """Records made from the input their stored rows were: counted unchanged, each as
        `count` would (a key this run already counted is merged), or out of range by the
        stored date: a known own date is the stored date (records.stored_input_hash); an
        unknown one is always inside the window."""
        counts, window, stored_keys = self.crawler.counts, self.window, self.storing.stored_keys
        detail = self.crawler.has_detail_phase() and self.crawler.record_type
        windowed = self._windowed
        counts.parsed += len(recognised)
        # (Counted once per round, not per record: a re-run comes this way for every record.)
        unchanged = merged = 0
        name, seen = None, None   # the keys this run counted of the type met last
        for entry, (input_hash, date), beyond_window in recognised:
            record_type = entry.record_type
            if (windowed and input_hash.endswith(DATE_KNOWN) and not beyond_window
                    and not window.holds(as_date(date))):
                counts.out_of_range += 1
                continue
            if record_type.name != name:
                name = record_type.name
                seen = stored_keys.setdefault(name, {})
            if entry.raw_key in seen:
                merged += 1   # same key already stored or recognised earlier in this run
            else:
                seen[entry.raw_key] = "unchanged"
                unchanged += 1
            if detail == name:
                self._recognised_for_detail.append(SimpleNamespace(**dict(zip(record_type.key, entry.raw_key[1:]))))
        counts.merged += merged
        counts.unchanged += unchanged
        counts.saved += unchanged

    def _prepared(self, entry: Entry, record: BaseModel) -> BaseModel:
        """The validated record, its containers checked against the structural limits
        (recordlimits.py), then prepared (as crawler.prepare_record). Raises for the item's
        dead letter."""
        check_containers(record, entry.fields is record)
        return prepare(entry.record_type, record, source=self.crawler.source, today=self._today,
                       public_url=self._public_url, moved_from=self._moved_from)

    def _add(self, entry: Entry, record: BaseModel, item: _Parsed, raw: Any) -> None:
        record_type = entry.record_type
        # Dates never read stay in; so do records of a list item an earlier run left.
        if self._windowed and not (in_window(record_type, record, self.window) or item.beyond_window):
            self.crawler.counts.out_of_range += 1
            return
        key = _key_of(record_type, record, self.crawler.source)
        # A key this run already stored is merged into by another input: the stored row keeps
        # naming the first one (else each run would swap the two and write every time).
        name = record_type.name
        input_hash = (None if key in self.storing.stored_keys.get(name, _NOTHING)
                      else stored_input_hash(record_type, entry.input_hash, record))
        # (By the type's name: a declaration's hash is a Python call over its fields.)
        waiting = self.batches.get(name)
        if waiting is None:
            waiting = self.batches[name] = (record_type, [])
            self._batched_keys[name] = set()
        waiting[1].append((record, raw, input_hash))
        self._batched_keys[name].add(key)
        self.batched += 1
        self.batched_bytes += entry.size

    def batch_full(self, settings) -> bool:
        """`batch_size` records waiting for the store, or fewer whose input (`Entry.size`) reached
        `batch_bytes` (few commits; large records bounded in memory). Unchanged ones do not count."""
        if self.batched + self.parsed_entries >= settings.batch_size:
            return True
        if self.batched_bytes + self.parsed_bytes < settings.batch_bytes:
            return False
        self.resolve()   # which parsed records wait for the store (a re-run's mostly do not)
        return self.batched_bytes >= settings.batch_bytes

    # ---- store ----------------------------------------------------------------------------
    def confirm(self, *, raise_failure: bool = True) -> None:
        """Wait until the batch last stored is committed (Storing.confirm)."""
        self.storing.confirm(raise_failure=raise_failure)

    def flush(self) -> None:
        """Every waiting record stored, one commit per type's batch, and counted."""
        self.resolve()
        for name, (record_type, batch) in self.batches.items():
            self.storing.store_batch(record_type, batch, unstored=self._unstored(name))
        self.batches.clear()
        self._batched_keys.clear()
        self.batched = self.batched_bytes = 0
        if self._recognised_for_detail:
            from basecrawler.pipeline import enrichment

            # Recognised records skipped the store, not the detail queue (a no-op when queued).
            recognised, self._recognised_for_detail = self._recognised_for_detail, []
            enrichment.enqueue(self.crawler, recognised)


def raw_parser(crawler: Any) -> Callable[[Any], Any]:
    """The source's parse() as a callable of one raw item, called the way it is written (on
    the run context or the first API's `self`). The intake asks it once per run, not per item."""
    return functools.partial(crawler.parse, crawler.context) if crawler.takes_context("parse") else crawler.parse


def _key_of(record_type: RecordType, record: BaseModel, source: str) -> tuple:
    """A validated record's stored key (source first), as the store's rows give it (a date as
    ISO text)."""
    getter = _KEY_GETTERS.get(record_type.model)
    if getter is None:
        getter = _KEY_GETTERS[record_type.model] = _key_getter(record_type)
    return (source, *getter(record))


# By the type's model class (hashed by identity, in C): a type registered again under the same
# name with another model gets its own getter.
_KEY_GETTERS: dict[type, Any] = {}


def _key_getter(record_type: RecordType):
    """The key fields of a record as a tuple: an attrgetter where every key field is declared
    `str` or `int` (the usual case, one C call), else each value converted."""
    names = tuple(record_type.key)
    fields = record_type.model.model_fields
    if len(names) > 1 and all(fields[name].annotation in (str, int) for name in names):
        return attrgetter(*names)
    return lambda record: tuple(value.isoformat() if hasattr(value := getattr(record, name), "isoformat") else value
                                for name in names)


__all__ = ["Intake", "LOOKUP_EVERY", "raw_parser"]
