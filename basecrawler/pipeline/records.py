"""Raw items and the records made from them, before the store: the provenance wrapper `Raw`,
the date window, making validated records of any type from what `parse()` returned (`make`),
and what every record goes through (`prepare`: plausible dates, http(s)-only links, public
links). The pipeline (crawler.py), dead-letter retry (deadletters.py) and the enrichment ladder
all make records here, so a record is made the same way whichever path it comes by."""
from __future__ import annotations

import datetime as dt
import functools
import hashlib
import io
import logging
import marshal
import os
import pickle
import sys
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

from pydantic import BaseModel

from basecrawler.formats.dates import is_plausible_date, parse_date
from basecrawler.errors import Skip
from basecrawler.recordtypes import Record, RecordType, get_record_type
from basecrawler.recordtypes.declaration import DATE_UNKNOWN
from basecrawler.recordtypes.registry import record_type_of_model

log = logging.getLogger("basecrawler")


@dataclass
class Raw:
    """A raw item with where it came from; sources may yield it instead of bare data so a
    dead letter can point at the URL and the archived response."""

    data: Any
    url: str | None = None
    response_sha256: str | None = None


@dataclass
class Window:
    """The run's date window; either end may be open."""

    since: dt.date | None = None
    until: dt.date | None = None

    def holds(self, date: dt.date | None) -> bool:
        """True for a date inside the window, and for no date at all: an item whose date could
        not be read is never dropped because of it."""
        if date is None:
            return True
        return not (self.since and date < self.since) and not (self.until and date > self.until)


_DEFAULTS: dict[tuple, dict] = {}


def _defaults_for(record_type: RecordType, defaults: tuple[tuple[str, Any], ...]) -> dict:
    """The source's defaults (country, source_lang) a type's model has fields for. Cached by
    the type's name (a str hashes once; the declaration's own hash is a Python call)."""
    cached = _DEFAULTS.get((record_type.name, defaults))
    if cached is None:
        cached = _DEFAULTS[(record_type.name, defaults)] = {
            name: value for name, value in defaults if name in record_type.model.model_fields}
    return cached


@dataclass(slots=True)
class Entry:
    """One record as parse() handed it over, before validation: its type, its fields (a dict
    with the source's defaults filled in, or a model instance) and, for a dict, the hash of
    that input (`EntryMaker`), by which an unchanged record is recognised unvalidated."""

    record_type: RecordType
    fields: Any
    input_hash: str | None = None
    # The stored key (source first) with the key fields as parse() gave them (text stripped):
    # where the stored row made from the same input would be. A key the model normalises
    # otherwise is simply not found there.
    raw_key: tuple | None = None


def entries(produced: Any, *, default_type: RecordType, defaults: dict | tuple,
            maker: "EntryMaker | None" = None) -> list[Entry]:
    """What `parse()` returned as typed entries: a dict (a record of the source's default
    type, the source's `defaults` filled in), a model instance, a `Record(type, fields)`,
    several of these, or None. Raises `Skip`, or an unknown type's or a foreign model's error:
    the item is then one dead letter, whole. With the run's `maker` (its `defaults` are the
    ones given here), every dict entry carries its input hash and its stored key."""
    if produced.__class__ is dict:   # the usual item: one record of the default type
        listed = (produced,)
    elif produced is None:
        return []
    elif isinstance(produced, Skip):
        raise produced
    else:
        listed = [produced] if isinstance(produced, (dict, BaseModel, Record)) else produced
    frozen = defaults if isinstance(defaults, tuple) else tuple(defaults.items())   # (the intake's, frozen once)
    made = []
    for entry in listed:
        if isinstance(entry, Record):
            record_type, fields = get_record_type(entry.type), entry.fields
        else:
            record_type, fields = default_type, entry
        if isinstance(fields, BaseModel):
            if not isinstance(fields, record_type.model):
                record_type = record_type_of_model(type(fields)) or record_type
            if not isinstance(fields, record_type.model):
                raise TypeError(f"parse() returned a {type(fields).__name__}, the model of no record type")
            made.append(Entry(record_type, fields))
        elif maker is not None:
            made.append(maker.entry(record_type, fields))
        else:
            made.append(Entry(record_type, _with_defaults(fields, _defaults_for(record_type, frozen))))
    return made


def _with_defaults(given: Any, defaults: dict) -> dict:
    """A copy of what parse() gave, the defaults filled in where it has no value of its own.
    Taken at once: a source that hands the same dict over again, changed, has the record it
    returned first validated, as it was hashed. (A copy and an assignment per missing
    default: cheaper than `{**defaults, **given}`.)"""
    fields = given.copy() if given.__class__ is dict else {**given}
    for name, value in defaults.items():
        if name not in fields:
            fields[name] = value
    return fields


def _raw_key(record_type: RecordType, fields: dict, source: str) -> tuple | None:
    """The stored key as parse() gave it (text stripped), or None where the store keeps it in
    another form: not looked up (EntryMaker.entry takes the usual all-text key in C)."""
    key = [source]
    for name in record_type.key:
        value = fields.get(name)
        if value.__class__ is str:
            value = value.strip()
        elif value.__class__ is not int:
            return None   # no key, or one the store keeps in another form (a date…): not looked up
        key.append(value)
    return tuple(key)


_KEY_GETTERS: dict[tuple, Callable[[dict], tuple]] = {}


def _key_getter(record_type: RecordType) -> Callable[[dict], tuple]:
    """The key fields of a dict as a tuple, in one C call (cached by the key's names)."""
    names = record_type.key
    getter = _KEY_GETTERS.get(names)
    if getter is None:
        getter = _KEY_GETTERS[names] = (itemgetter(*names) if len(names) > 1
                                        else (lambda fields, get=itemgetter(names[0]): (get(fields),)))
    return getter


def validate(entry: Entry) -> BaseModel:
    """The entry as a validated model instance (raises a ValidationError)."""
    if isinstance(entry.fields, BaseModel):
        return entry.fields
    return entry.record_type.model.model_validate(entry.fields)


def make(produced: Any, *, default_type: RecordType, defaults: dict) -> list[tuple[RecordType, BaseModel]]:
    """`entries`, validated: raises on the first failure (the item is then one dead letter, whole)."""
    return [(entry.record_type, validate(entry)) for entry in entries(produced, default_type=default_type,
                                                                        defaults=defaults)]


# ---- the input hash ------------------------------------------------------------------------
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
    """Where the run's pickler writes: straight into the record's digest (no bytes kept)."""

    __slots__ = ("digest",)

    def write(self, data) -> None:
        self.digest.update(data)


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
            _defaults_for(record_type, self._defaults), hashlib.sha256(self._context_of(record_type).encode()),
            _key_getter(record_type))
        return found

    def entry(self, record_type: RecordType, given: Any) -> Entry:
        defaults, seeded, key_of = self._by_type.get(record_type.name) or self._for_type(record_type)
        fields = given.copy() if given.__class__ is dict else {**given}   # as _with_defaults, inline
        for name, value in defaults.items():
            if name not in fields:
                fields[name] = value
        digest = self._sink.digest = seeded.copy()
        try:
            if not self._fast:   # (no fast mode in this Python: no memo kept across records)
                self._pickler.clear_memo()
            self._pickler.dump(fields)
            input_hash = digest.hexdigest()[:HASH_CHARS]
        except Exception:   # cyclic, or a value pickle cannot write: this pickler is not trusted again
            self._new_pickler()
            input_hash = input_hash_of(fields, self._context_of(record_type))
        try:   # the usual key: text only (str.strip refuses anything else)
            raw_key = (self.source, *map(str.strip, key_of(fields)))
        except (KeyError, TypeError):
            raw_key = _raw_key(record_type, fields, self.source)
        return Entry(record_type, fields, input_hash, raw_key)


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
    if record_type.date_field is None:
        return input_hash + UNDATED
    if f"implausible_{record_type.date_field}" in (record.__dict__.get("extra") or {}):
        return None
    return input_hash + (DATE_NOT_KNOWN if is_date_unknown(record_type, record) else DATE_KNOWN)


# The framework's own files that validate and prepare a record, besides the type's modules.
_FRAMEWORK_FILES = ("recordtypes/fields.py", "formats/dates.py", "pipeline/records.py")


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


def is_date_unknown(record_type: RecordType, record: BaseModel) -> bool:
    # The instance dict, not getattr: for a field the model does not have (most types have no
    # `date_unknown`), getattr goes through pydantic's __getattr__ and its AttributeError,
    # about 6 % of a first run of such a type (py-spy), asked three times per record.
    values = record.__dict__
    return bool(values.get(DATE_UNKNOWN, False)) or values.get(record_type.date_field) is None


def prepare(record_type: RecordType, record: BaseModel, *, source: str, today: dt.date,
            public_url: Callable[[str], str] | None, moved_from: tuple[str, ...] | None = None) -> BaseModel:
    """What every record goes through before the date window and the store: an implausible
    date becomes date-unknown with the raw date kept in `extra`; a link that is not http(s)
    (`javascript:`, a file path, a bare word) is kept in `extra` as text, never as a link; links
    name the public site (`public_url` is None when no endpoint is overridden; `moved_from`,
    the overridden origins, lets `extra` be searched for them in one pass of C before walking it)."""
    update: dict[str, Any] = {}
    fields = record_type.model.model_fields
    extra = record.__dict__.get("extra")   # (not getattr: see is_date_unknown)
    extra_before = extra
    date_field = record_type.date_field
    if date_field and not is_date_unknown(record_type, record):
        value = getattr(record, date_field)
        if (date := _date_of(value)) is not None and not is_plausible_date(date, today):
            log.warning("%s %s: %s %s is implausible (before 1900 or after tomorrow); stored as date-unknown, "
                        "raw date kept in extra", source, _key_text(record_type, record), date_field.replace("_", " "),
                        value)
            extra = {**(extra or {}), f"implausible_{date_field}": date.isoformat()}
            update[date_field] = record_type.date_sentinel
            if DATE_UNKNOWN in fields:
                update[DATE_UNKNOWN] = True
    for field in record_type.url_fields:
        url = getattr(record, field, None)
        if url is None:
            continue
        if not _is_web_link(url):
            log.warning("%s %s: %s %.80r is not an http(s) link; kept in extra as text", source,
                        _key_text(record_type, record), field, url)
            extra = {**(extra or {}), f"{field}_text": str(url)}
            update[field] = None
        elif public_url is not None and (public := public_url(url)) != url:
            update[field] = public   # a copy of the record only when a link really moved
    if public_url is not None and extra and (moved_from is None or _mentions(extra, moved_from)):
        extra = _public_links(extra, public_url)
    if extra is not extra_before and "extra" in fields:
        update["extra"] = extra
    return record.model_copy(update=update) if update else record


def _date_of(value: Any) -> dt.date | None:
    """A date field's value as a date (a type may keep its date as text): the sources' own date
    rule; text that is no date is judged by nothing (it is never dropped or flagged for it)."""
    return value if value.__class__ is dt.date else parse_date(value)


def _is_web_link(url: Any) -> bool:
    if not isinstance(url, str) or "://" not in url:
        return False
    if url.isascii() and "[" not in url and "]" not in url and url.lstrip()[:8].lower().startswith(("http://", "https://")):
        return True   # what urlsplit would say, without its cost (it only raises on brackets or non-ASCII hosts)
    try:
        return urlsplit(url.strip()).scheme.lower() in ("http", "https")
    except ValueError:   # "http://[broken": not a link anyone can follow
        return False


def _key_text(record_type: RecordType, record: BaseModel) -> str:
    return " ".join(str(getattr(record, name, "")) for name in record_type.key)


def in_window(record_type: RecordType, record: BaseModel, window: "Window") -> bool:
    """Whether a prepared record is inside the run's window: a type without a date, and a
    record whose date is unknown, always are."""
    if record_type.date_field is None or is_date_unknown(record_type, record):
        return True
    return window.holds(_date_of(getattr(record, record_type.date_field)))


def _mentions(value: Any, origins: tuple[str, ...]) -> bool:
    """Whether any origin occurs in `value`, a record's `extra`: asked of every record of a run
    behind an endpoint override (a mirror, a proxy, a local server). A walk of every value in
    Python cost a fifth of such a run, and `repr` (one C call) still ~19 µs of a `ca` record's
    extra (0.66 s of 34,832 recalls); `marshal` writes the same values in ~8 µs, every text as
    its UTF-8 bytes whole, so an origin in any text is found in them. A value marshal cannot
    write (a date, an object) falls back to its repr. A false hit only costs the walk after."""

    try:
        data = marshal.dumps(value)
    except ValueError:   # "unmarshallable object"
        text = repr(value)
        return any(origin in text for origin in origins)
    return any(origin.encode("utf-8", "surrogatepass") in data for origin in origins)


def _public_links(value: Any, public_url: Callable[[str], str]) -> Any:
    """`value` with every link on an overridden endpoint moved to the public host; the same
    object when nothing moved (so the record is not copied for nothing)."""
    if isinstance(value, str):
        return public_url(value) if "://" in value else value
    if isinstance(value, dict):
        moved = {key: _public_links(item, public_url) for key, item in value.items()}
        return value if all(moved[key] is item for key, item in value.items()) else moved
    if isinstance(value, list):
        moved = [_public_links(item, public_url) for item in value]
        return value if all(new is old for new, old in zip(moved, value)) else moved
    return value


def rebase(url: str, bases: list[tuple[str, str]]) -> str:
    """`url` with the first matching (transport origin → public origin) pair swapped."""
    for transport_base, public_base in bases:
        if url.startswith(transport_base) and url[len(transport_base):len(transport_base) + 1] in ("", "/", "?", "#"):
            return public_base + url[len(transport_base):]
    return url


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def as_date(value) -> dt.date | None:
    if value is None or isinstance(value, dt.date):
        return value
    return dt.date.fromisoformat(str(value))


__all__ = ["Raw", "Window", "Entry", "entries", "validate", "make", "hash_context", "input_hash_of", "EntryMaker",
           "stored_input_hash", "code_fingerprint", "prepare", "in_window", "is_date_unknown", "rebase", "origin", "as_date"]
