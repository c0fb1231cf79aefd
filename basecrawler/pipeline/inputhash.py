"""The input hash: a record's "made from exactly this input, by exactly this code", by which the
pipeline counts a record unchanged without validating it (pipeline/intake.py). `EntryMaker`
makes the run's dict entries (records.Entry) with it; `stored_input_hash` is the value a stored
row keeps; `code_fingerprint` is the code part of it."""
from __future__ import annotations

import functools
import hashlib
import io
import os
import pickle
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

from pydantic import BaseModel

from basecrawler.pipeline.records import Entry, defaults_for, is_date_unknown, key_as_given, raw_key_getter
from basecrawler.recordtypes import RecordType

# A record's input hash says "this record was made from exactly this input, by exactly this
# code". Equal to the hash of the input that last wrote the stored row, it means merging the
# record again would change nothing (the COALESCE merge is idempotent), so the pipeline counts
# it as unchanged without validating, preparing or comparing it (issue #23.3). The stored value
# ends in one letter saying what the record's own date was (see `stored_input_hash`).
DATE_KNOWN, DATE_NOT_KNOWN, UNDATED = "k", "u", "-"


def hash_context(record_type: RecordType, source: str, public_bases: Iterable[tuple[str, str]]) -> str:
    """What besides parse()'s output decides the record: the code that validates and prepares
    it (`code_fingerprint`), the source, and where links are rebased to."""
    return f"{code_fingerprint(record_type)}|{source}|{sorted(public_bases)!r}|"


class _Digesting:
    """Where the run's pickler writes: straight into the record's digest (no bytes kept),
    counting them (a record's size, `Entry.size`)."""

    __slots__ = ("digest", "written")

    def __init__(self) -> None:
        self.written = 0

    def write(self, data) -> None:
        self.digest.update(data)
        self.written += len(data)


class EntryMaker:
    """The dict entries of one run (one thread: an `Intake` holds its own): each with the
    source's defaults, its input hash (`input_hash_of(fields, context_of(type))`, cheaper) and
    its raw stored key, what a type needs for them kept by its name.

    One pickler serves every record, in fast mode (no memo: a value is written whole wherever
    it occurs, so the bytes do not depend on which objects are shared, and one record's memo
    never reaches the next), writing into a SHA-256 already fed the type's context; a value
    fast mode refuses (a cyclic structure) falls back to a plain pickle, one pickle cannot
    write at all to no hash."""

    def __init__(self, source: str, defaults: tuple[tuple[str, Any], ...], context_of: Callable[[RecordType], str]):
        self.source = source
        self._defaults = defaults
        self._context_of = context_of
        self._by_type: dict[str, tuple[dict, Any, Callable[[dict], tuple]]] = {}
        self._new_pickler()

    def _new_pickler(self) -> None:
        self._sink = _Digesting()
        self._pickler, self._fast = _fast_pickler(self._sink)

    def _for_type(self, record_type: RecordType) -> tuple[dict, Any, Callable[[dict], tuple]]:
        """(its defaults, a digest fed its hash context, its key getter)"""
        found = self._by_type[record_type.name] = (
            defaults_for(record_type, self._defaults), hashlib.sha256(self._context_of(record_type).encode()),
            raw_key_getter(record_type))
        return found

    def entry(self, record_type: RecordType, given: Any) -> Entry:
        defaults, seeded, key_of = self._by_type.get(record_type.name) or self._for_type(record_type)
        fields = given.copy() if given.__class__ is dict else {**given}   # as _with_defaults, inline
        for name, value in defaults.items():
            if name not in fields:
                fields[name] = value
        digest = self._sink.digest = seeded.copy()
        before = self._sink.written
        try:
            if not self._fast:   # (no fast mode in this Python: no memo kept across records)
                self._pickler.clear_memo()
            self._pickler.dump(fields)
            input_hash = digest.hexdigest()[:HASH_CHARS]
            size = self._sink.written - before
        except Exception:   # cyclic, or a value pickle cannot write: this pickler is not trusted again
            self._new_pickler()
            input_hash = input_hash_of(fields, self._context_of(record_type))
            size = 0
        try:   # the usual key: text only (str.strip refuses anything else)
            raw_key = (self.source, *map(str.strip, key_of(fields)))
        except (KeyError, TypeError):
            raw_key = key_as_given(record_type, fields, self.source)
        return Entry(record_type, fields, input_hash, raw_key, size)


# The stored hash: 128 bits of SHA-256, in hex, and the date letter (`stored_input_hash`).
HASH_CHARS = 32


def _fast_pickler(sink) -> tuple[pickle.Pickler, bool]:
    """A protocol-5 pickler in fast mode (no memo), and whether it is. `Pickler.fast` is
    documented as deprecated: a Python without it gets a plain pickler, whose bytes differ only
    where one record shares an object between fields (such a record may then look changed once
    and go the whole way; nothing is lost)."""
    pickler = pickle.Pickler(sink, protocol=5)
    try:
        pickler.fast = True
    except AttributeError:
        return pickler, False
    return pickler, True


def _serialised(fields: dict) -> bytes:
    """The bytes `EntryMaker` digests: a fast-mode pickle (protocol 5), or where fast mode
    refuses (a cycle) a plain one. The two cannot coincide for different values: each decodes
    to its value."""
    out = io.BytesIO()
    pickler, _ = _fast_pickler(out)
    try:
        pickler.dump(fields)
        return out.getvalue()
    except ValueError:   # fast mode refuses cycles; pickle's memo writes them
        return pickle.dumps(fields, protocol=5)


def input_hash_of(fields: dict, context: str) -> str | None:
    """The hash of one dict parse() returned (defaults filled in), or None when it cannot be
    serialised (a value pickle refuses: the record then simply goes the whole way). Pickle
    writes every value as it is (no repr that shortens or shows an address) and is 2–3× faster
    than `repr` on a big record; equal input gives equal bytes (fast mode: an object shared
    between two fields is written twice, as an equal copy would be). A pickled object whose
    reduction differs run to run only makes the record look changed (it is then validated and
    compared as before)."""
    try:
        data = _serialised(fields)
    except Exception:   # an object pickle cannot write (a parser node, a generator…)
        return None
    return hashlib.sha256(context.encode() + data).hexdigest()[:HASH_CHARS]


def stored_input_hash(record_type: RecordType, input_hash: str | None, record: BaseModel) -> str | None:
    """The value kept in the stored row for a record made from the input `input_hash`: the
    hash and whether the record's own date was known ("k": the stored date is that date, so a
    hit can be windowed by it), unknown ("u": always inside the window) or the type has none
    ("-"). None when the record cannot be recognised later by its input: no dict input, or a
    date `prepare` found implausible (that judgement moves with today's date)."""
    if input_hash is None:
        return None
    date_field = record_type.date_field
    if date_field is None:
        return input_hash + UNDATED
    implausible = _IMPLAUSIBLE.get(date_field) or _IMPLAUSIBLE.setdefault(date_field, f"implausible_{date_field}")
    if implausible in (record.__dict__.get("extra") or _NO_EXTRA):
        return None
    return input_hash + (DATE_NOT_KNOWN if is_date_unknown(record_type, record) else DATE_KNOWN)


# The `extra` key `prepare` keeps an implausible date under, by the date field's name.
_IMPLAUSIBLE: dict[str, str] = {}
_NO_EXTRA: dict = {}


# The framework's own files that validate and prepare a record, besides the type's modules.
_FRAMEWORK_FILES = ("recordtypes/fields.py", "formats/dates.py", "pipeline/records.py", "pipeline/inputhash.py")


@functools.lru_cache(maxsize=None)
def code_fingerprint(record_type: RecordType) -> str:
    """A digest of the code a record of this type is made with: the modules of its model and
    of the model's bases (the type's own validators), the framework's field helpers and this
    module, and the versions of pydantic and Python. A fix to any of them changes every input hash, so the next
    run validates everything again instead of keeping what the old code made. A model without
    a source file (made at runtime) gets a value unique to this process: never recognised."""
    import pydantic

    digest = hashlib.blake2b(f"{pydantic.VERSION} {sys.version}".encode(), digest_size=16)   # pickle may change with Python
    package = Path(__file__).resolve().parents[1]
    files = [package / name for name in _FRAMEWORK_FILES]
    for cls in record_type.model.__mro__:
        module = sys.modules.get(cls.__module__)
        if module is None or cls.__module__.startswith(("pydantic", "builtins")):
            continue
        path = getattr(module, "__file__", None)
        if path is None:
            return os.urandom(8).hex()
        files.append(Path(path))
    for path in dict.fromkeys(files):
        try:
            digest.update(path.read_bytes())
        except OSError:
            return os.urandom(8).hex()
    return digest.hexdigest()




__all__ = ["DATE_KNOWN", "DATE_NOT_KNOWN", "UNDATED", "HASH_CHARS", "hash_context", "EntryMaker", "input_hash_of",
           "stored_input_hash", "code_fingerprint"]
