"""Record-type discovery: every `RecordType` defined at module level in `record_types/`, plus
the entry-point group `basecrawler.record_types` (a module or a RecordType), plus types
registered in-process. No list to edit."""
from __future__ import annotations

import importlib
import importlib.metadata
import logging
import pkgutil
import threading

from basecrawler.errors import ConfigError
from basecrawler.recordtypes.declaration import RecordType

log = logging.getLogger("basecrawler")

ENTRY_POINT_GROUP = "basecrawler.record_types"
BUILTIN_PACKAGE = "record_types"
# The type a source emits when it names none (`BaseCrawler.record_type`): every source written
# before types produced vehicle recalls.
DEFAULT_RECORD_TYPE = "vehicle_recall"

_registered: dict[str, RecordType] = {}
_cache: dict[str, RecordType] | None = None
_lock = threading.Lock()


class UnknownRecordType(ConfigError, KeyError):
    """A type name nobody declared (the message lists the known ones): a usage error like an
    unknown source, and a KeyError for callers that look types up like a mapping."""

    kind = "unknown_record_type"

    def __init__(self, name: str, known: list[str]):
        self.name, self.known = name, known
        super().__init__(f"unknown record type {name!r}; known: {', '.join(known) or 'none'}")


def _types_in(module) -> list[RecordType]:
    return [value for value in vars(module).values() if isinstance(value, RecordType)]


def _load(origin: str, load):
    """A type module, or None when it cannot be loaded: its records cannot be stored (an
    ERROR), but the other types and every source of theirs go on (like a broken schema
    extension)."""
    try:
        return load()
    except Exception as exc:
        log.error("record types: %s left out: %s: %s", origin, type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
        return None


def _discover() -> dict[str, RecordType]:
    found: dict[str, RecordType] = {}

    def add(record_type: RecordType, origin: str) -> None:
        existing = found.get(record_type.name)
        if existing is not None and existing is not record_type:
            raise ValueError(f"record type {record_type.name!r} is declared twice ({origin})")
        found[record_type.name] = record_type

    package = importlib.import_module(BUILTIN_PACKAGE)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            module = _load(f"module {BUILTIN_PACKAGE}.{info.name}",
                           lambda name=info.name: importlib.import_module(f"{BUILTIN_PACKAGE}.{name}"))
            for record_type in _types_in(module) if module is not None else ():
                add(record_type, f"module {module.__name__}")
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        loaded = _load(f"entry point {entry_point.name}", entry_point.load)
        if loaded is None:
            continue
        for record_type in [loaded] if isinstance(loaded, RecordType) else _types_in(loaded):
            add(record_type, f"entry point {entry_point.name}")
    for record_type in _registered.values():
        add(record_type, "register_record_type()")
    return dict(sorted(found.items()))


def record_types() -> dict[str, RecordType]:
    """Name → declaration of every known type, sorted by name (discovered once per process)."""
    global _cache
    with _lock:
        if _cache is None:
            _cache = _discover()
        return dict(_cache)


def get_record_type(name: str) -> RecordType:
    types = record_types()
    try:
        return types[name]
    except KeyError:
        raise UnknownRecordType(name, list(types)) from None


def record_type_of_model(model: type) -> RecordType | None:
    """The type whose model is this pydantic class (a source's parse() returned an instance)."""
    return next((rt for rt in record_types().values() if rt.model is model), None)


def register_record_type(record_type: RecordType) -> RecordType:
    """Add a type in-process (tests, plug-ins loaded by hand); rediscovers on next use."""
    global _cache
    with _lock:
        _registered[record_type.name] = record_type
        _cache = None
    return record_type


def forget_registered_types() -> None:
    """Drop in-process registrations (test isolation)."""
    global _cache
    with _lock:
        _registered.clear()
        _cache = None
