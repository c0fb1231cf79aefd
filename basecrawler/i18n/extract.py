"""Which messages the reader can see, and the catalogues kept in step with them.

Static messages are found by Babel's extractors in the reading side's templates (Jinja's
`_()` / `ngettext`) and Python modules (`_()` / `gettext` / `ngettext`); dynamic ones are the
declared words of every record type (titles, labels, facet labels), the web view's column
descriptions and Datasette's filter operators, shown through the catalogue by their English
text. `python -m basecrawler.i18n.extract` adds what is missing to each .po (Korean left
empty for a person to fill: tests/test_i18n.py fails until they do) and drops what is gone.
"""
from __future__ import annotations

import sys
from pathlib import Path

from basecrawler import i18n

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "reading" / "web" / "templates"
# Modules whose `_()` messages a reader sees (the web view's plugins and the helpers beside
# them, the reading commands, the coverage lines `status` shows).
PYTHON = [ROOT / "reading" / "web" / "plugins", ROOT / "reading" / "web", ROOT / "reading", ROOT / "commands",
          ROOT / "i18n", ROOT / "operations"]
KEYWORDS = {"_": None, "gettext": None, "ngettext": (1, 2)}
# Datasette's filter operators as its filters list them (datasette/filters.py), shown translated.
DATASETTE_LOOKUPS = ("=", "!=", "contains", "does not contain", "ends with", "starts with", "like", "not like",
                     "glob", ">", ">=", "<", "<=", "in", "not in", "array contains", "array does not contain",
                     "date", "is empty", "is not empty", "is null", "is not null", "is blank", "is not blank")


def static_messages() -> dict[str, str | tuple]:
    """{message id: where it is (file:line)} of every `_()` in templates and reading modules.
    A plural message's id is its (singular, plural) pair."""
    from babel.messages.extract import extract_from_file
    found: dict = {}
    for path in sorted(TEMPLATES.glob("*.html")):
        for line, message, _comments, _ctx in extract_from_file("jinja2.ext:babel_extract", str(path),
                                                                 keywords=KEYWORDS, options={"extensions": "jinja2.ext.i18n"}):
            found.setdefault(message, f"{path.relative_to(ROOT.parent)}:{line}")
    for folder in PYTHON:
        for path in sorted(folder.glob("*.py")):
            for line, message, _comments, _ctx in extract_from_file("python", str(path), keywords=KEYWORDS):
                found.setdefault(message, f"{path.relative_to(ROOT.parent)}:{line}")
    return {k: v for k, v in found.items() if k and (not isinstance(k, tuple) or all(k))}


def dynamic_messages() -> dict[str, str]:
    from basecrawler.reading.browse import COMMON_COLUMN_DESCRIPTIONS, build_metadata, column_descriptions
    from basecrawler.recordtypes import record_types
    found: dict[str, str] = {}
    for record_type in record_types().values():
        where = f"record type {record_type.name}"
        found.setdefault(record_type.title, where)
        for label in record_type.labels.values():
            found.setdefault(label, where)
        for facet in record_type.facets:
            found.setdefault(facet.label, where)
        for text in column_descriptions(record_type).values():
            found.setdefault(text, where)
    for text in COMMON_COLUMN_DESCRIPTIONS.values():
        found.setdefault(text.split(" — ")[0], "browse.COMMON_COLUMN_DESCRIPTIONS")
    metadata = build_metadata("/nonexistent/recalls.db")
    found.setdefault(metadata["title"], "browse.build_metadata")
    found.setdefault(metadata["description"], "browse.build_metadata")
    for lookup in DATASETTE_LOOKUPS:
        found.setdefault(lookup, "datasette filters")
    return found


def messages() -> dict:
    return {**dynamic_messages(), **static_messages()}


def update(lang: str) -> tuple[int, int]:
    """Bring `lang`'s .po in step with `messages()`; (added, dropped)."""
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po
    old = i18n.catalogue(lang)
    wanted = messages()
    fresh = Catalog(locale=lang, domain=i18n.DOMAIN, project="basecrawler", fuzzy=False)
    added = 0
    for message, where in sorted(wanted.items(), key=lambda item: str(item[1])):
        kept = old.get(message)
        if kept is None:
            added += 1
        fresh.add(message, kept.string if kept is not None else ("", "") if isinstance(message, tuple) else "",
                  locations=[(str(where).rsplit(":", 1)[0], None)])
    dropped = sum(1 for m in old if m.id and m.id not in wanted)
    with i18n.po_path(lang).open("wb") as handle:
        write_po(handle, fresh, width=100, omit_header=False, include_lineno=False)
    i18n.catalogue.cache_clear()
    i18n.translations.cache_clear()
    return added, dropped


if __name__ == "__main__":
    for code in (sys.argv[1:] or i18n.LANGUAGES):
        print(code, "added %d, dropped %d" % update(code))
