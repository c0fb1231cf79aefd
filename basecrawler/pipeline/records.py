"""Raw items and the records made from them, before the store: the provenance wrapper `Raw`,
the date window, making validated records of any type from what `parse()` returned (`make`),
and what every record goes through (`prepare`: plausible dates, http(s)-only links, public
links). The pipeline (crawler.py), dead-letter retry (deadletters.py) and the enrichment ladder
all make records here, so a record is made the same way whichever path it comes by. The input
hash by which an unchanged record is recognised unvalidated is inputhash.py's."""
from __future__ import annotations

import datetime as dt
import logging
import marshal
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Callable
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


def defaults_for(record_type: RecordType, defaults: tuple[tuple[str, Any], ...]) -> dict:
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
    # The input's size as the input hash pickled it (0 when not pickled): what a batch holding
    # the record grows by (`Intake.batch_full`).
    size: int = 0


def entries(produced: Any, *, default_type: RecordType, defaults: dict | tuple,
            maker: Any = None) -> list[Entry]:
    """What `parse()` returned as typed entries: a dict (a record of the source's default
    type, the source's `defaults` filled in), a model instance, a `Record(type, fields)`,
    several of these, or None. Raises `Skip`, or an unknown type's or a foreign model's error:
    the item is then one dead letter, whole. With the run's `maker` (its `defaults` are the
    ones given here: inputhash.EntryMaker), every dict entry carries its input hash and its stored key."""
    if produced.__class__ is dict:   # the usual item: one record of the default type
        if maker is not None:
            return [maker.entry(default_type, produced)]
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
            made.append(Entry(record_type, _with_defaults(fields, defaults_for(record_type, frozen))))
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


def key_as_given(record_type: RecordType, fields: dict, source: str) -> tuple | None:
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


_RAW_KEY_GETTERS: dict[tuple, Callable[[dict], tuple]] = {}


def raw_key_getter(record_type: RecordType) -> Callable[[dict], tuple]:
    """The key fields of a dict as a tuple, in one C call (cached by the key's names)."""
    names = record_type.key
    getter = _RAW_KEY_GETTERS.get(names)
    if getter is None:
        getter = _RAW_KEY_GETTERS[names] = (itemgetter(*names) if len(names) > 1
                                        else (lambda fields, get=itemgetter(names[0]): (get(fields),)))
    return getter


def validate(entry: Entry) -> BaseModel:
    """The entry as a validated model instance (raises a ValidationError)."""
    if isinstance(entry.fields, BaseModel):
        return entry.fields
    # The model's compiled validator itself: what `model_validate` calls with its defaults,
    # without the Python wrapper around it (asked once for every record that is not recognised).
    return entry.record_type.model.__pydantic_validator__.validate_python(entry.fields)


def make(produced: Any, *, default_type: RecordType, defaults: dict) -> list[tuple[RecordType, BaseModel]]:
    """`entries`, validated: raises on the first failure (the item is then one dead letter, whole)."""
    return [(entry.record_type, validate(entry)) for entry in entries(produced, default_type=default_type,
                                                                        defaults=defaults)]


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
    values = record.__dict__   # (not getattr: see is_date_unknown)
    extra = values.get("extra")
    extra_before = extra
    date_field = record_type.date_field
    # (`is_date_unknown`, inline: asked of every record)
    if date_field and not (values.get(DATE_UNKNOWN, False) or (value := values.get(date_field)) is None):
        if (date := _date_of(value)) is not None and not is_plausible_date(date, today):
            log.warning("%s %s: %s %s is implausible (before 1900 or after tomorrow); stored as date-unknown, "
                        "raw date kept in extra", source, _key_text(record_type, record), date_field.replace("_", " "),
                        value)
            extra = {**(extra or {}), f"implausible_{date_field}": date.isoformat()}
            update[date_field] = record_type.date_sentinel
            if DATE_UNKNOWN in record_type.model.model_fields:
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
    if extra is not extra_before and "extra" in record_type.model.model_fields:
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


__all__ = ["Raw", "Window", "Entry", "entries", "validate", "make", "defaults_for", "key_as_given", "raw_key_getter",
           "prepare", "in_window", "is_date_unknown", "rebase", "origin", "as_date"]
