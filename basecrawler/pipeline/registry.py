"""Source discovery: every BaseCrawler subclass in a module under `sources/`, plus the
entry-point group `basecrawler.sources` for third-party packages. No list to edit.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import logging
import pkgutil

from basecrawler.errors import DuplicateSource, UnknownSource

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "basecrawler.sources"


def _crawler_classes(module) -> list[type]:
    """The sources a module defines: its concrete classes of the source API with an id. (By
    `SourceAPI`, below the crawler: the crawler regroups after a run by discovering the
    sources, so naming `BaseCrawler` here tied the two into a circle.)"""
    from basecrawler.pipeline.source_api import SourceAPI   # (at the first discovery, not with this module)

    found = []
    for _, obj in inspect.getmembers(module, inspect.isclass):
        if issubclass(obj, SourceAPI) and not inspect.isabstract(obj) \
                and obj.__module__ == module.__name__ and getattr(obj, "source", None):
            found.append(obj)
    return found


def discover(package: str = "sources") -> dict[str, type]:
    """Map source id → crawler class. Raises DuplicateSource when two classes share an id."""
    registry: dict[str, type] = {}

    def add(cls: type, origin: str) -> None:
        existing = registry.get(cls.source)
        if existing is not None and existing is not cls:
            raise DuplicateSource(
                f"source id {cls.source!r} is defined twice: {existing.__module__}.{existing.__qualname__} "
                f"and {cls.__module__}.{cls.__qualname__} ({origin})"
            )
        registry[cls.source] = cls

    pkg = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        for cls in _crawler_classes(module):
            add(cls, f"module {module.__name__}")

    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        loaded = entry_point.load()
        classes = [loaded] if inspect.isclass(loaded) else _crawler_classes(loaded)
        for cls in classes:
            add(cls, f"entry point {entry_point.name}")
    return dict(sorted(registry.items()))


def known_countries(package: str = "sources") -> list[str] | None:
    """The country codes the registered sources publish, sorted; None when one of them
    publishes records of any country (`many_countries`)."""
    sources = discover(package).values()
    if any(getattr(cls, "many_countries", False) for cls in sources):
        return None
    return sorted({cls.country for cls in sources if cls.country})


def unconfigured(cls: type) -> list[str]:
    """The endpoints a source declares it cannot run without (`needs_configuration`, e.g. a
    package index the operator chooses) that have no BASECRAWLER_<SOURCE>_<ENDPOINT>_URL."""
    from basecrawler.config import endpoint_override

    return [name for name in getattr(cls, "needs_configuration", ()) if not endpoint_override(cls.source, name)]


def configure_hint(cls: type, missing: list[str]) -> str:
    settings = " and ".join(f"BASECRAWLER_{cls.source.upper()}_{name.upper()}_URL" for name in missing)
    return f"not configured: set {settings}"


def get_source(source_id: str, package: str = "sources") -> type:
    registry = discover(package)
    try:
        return registry[source_id]
    except KeyError:
        raise UnknownSource(source_id, list(registry)) from None
