"""The declaration of a record type, and what is derived from it without any I/O.

Ideas taken from FollowTheMoney (a schema is data every tool reads: properties, labels,
`featured` columns, a caption), dlt (a resource declares its primary key and the pipeline
derives the merge from it) and Scrapy (spiders yield several kinds of items; pipelines handle
any of them through one adapter). The spine (`BaseCrawler.run()`) stays one fixed pipeline.
"""
from __future__ import annotations

import datetime as dt
import re
import types
import typing
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Mapping, NamedTuple

from pydantic import BaseModel

# Columns the framework adds to every type's table; no model declares them.
BOOKKEEPING_COLUMNS: dict[str, type] = {
    "first_seen_at": str,
    "updated_at": str,
    "translated_at": str,
    "translation_status": str,
    "translation_note": str,
    # A translation worker's claim on the row (several workers on one store never send a row twice).
    "translation_claimed_at": str,
    "translation_claimed_by": str,
    # A digest of the incoming row that last wrote the record (upsert.py): the same input again
    # is `unchanged` without merging and comparing it column by column.
    "input_hash": str,
    # 1 when the record is another publisher's copy in a group of records (store/groups.py keeps
    # it with the `record_groups` table), NULL otherwise: readers hide copies with a column test.
    "is_copy": int,
}
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# A record may lack its date (`date_optional`): this column then says so (1), so a record is
# counted, searchable and never dropped by the window, and a later real date replaces it.
DATE_UNKNOWN = "date_unknown"


@dataclass(frozen=True)
class Facet:
    """A field people filter and count by (`--filter field=value`, a web facet).

    `multi`: the field holds several values (a JSON list in the column); a filter matches a
    record when any of its values matches. `expand`: a stored value → the facet values it
    counts under (a model-year range "2019-2021" counts under 2019, 2020 and 2021); None means
    the value itself. `normalise`: a filter value → the form stored in the column (a maker's
    published name → its key: `Ford Motor Company` → `FORD`), applied to `--filter` and to the
    facet's `option`. `option`: the name of a command-line option that filters by this facet
    (`manufacturer` → `--manufacturer`). `also_text`: a translated base whose original or Korean
    text, by substring, also matches a filter given through `option`. `ranged`: a stored value
    may be an inclusive range `low-high` of two values as wide as a filter value (model years
    `2019-2021`); a filter value inside the range matches it.
    """

    field: str
    label: str
    multi: bool = False
    expand: Callable[[Any], list[str]] | None = None
    normalise: Callable[[Any], Any] | None = None
    option: str | None = None
    also_text: str | None = None
    ranged: bool = False

    def filter_value(self, value: Any) -> Any:
        """A value as a user typed it → the value the column holds."""
        return self.normalise(value) if self.normalise is not None else value


@dataclass(frozen=True)
class RecordType:
    """One kind of record. Everything else (table, indexes, search, upsert, export, web,
    translation, migrate, status) is derived from this."""

    name: str                        # "vehicle_recall": --type, status, web, entry points
    title: str                       # "Vehicle recalls": headings
    model: type[BaseModel]           # the pydantic model; text fields as X_original / X_ko pairs
    table: str                       # the store's table for this type
    key: tuple[str, ...]             # identity *within a source*; the store prepends `source`
    date_field: str | None = None    # the record's date (the window, the watermark, the sort)
    # A record may lack a date: stored with `date_unknown = 1`, counted, searchable, never
    # dropped by the window. `date_sentinel` is what the date column then holds (None = NULL;
    # vehicle recalls keep 1970-01-01 for compatibility with stores made before types).
    date_optional: bool = True
    date_sentinel: dt.date | None = None
    translated: tuple[str, ...] = ()     # base names with `_original` / `_ko` columns
    searchable: tuple[str, ...] = ()     # extra plain columns in the full-text index
    facets: tuple[Facet, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)   # column → human header
    display: tuple[str, ...] = ()        # best text of a record: the first non-empty of these
                                         # translated bases (Korean when there, else original)
    listing: tuple[str, ...] = ()        # the columns a table of this type shows first
    card: tuple[str, ...] = ()           # the fields a record card shows, in order
    # What a card is headed by: what was recalled (a maker and model, a product), joined by a
    # space; translated bases read in Korean when translated. Empty, or all empty on a record:
    # the record's best text (`display`).
    heading: tuple[str, ...] = ()
    # Columns computed from a prepared row (e.g. a normalised manufacturer key), stored beside
    # the data and recomputed on every upsert; `derived_columns` gives their SQL types.
    derived: Callable[[dict], dict] | None = None
    derived_columns: Mapping[str, type] = field(default_factory=dict)
    # A publisher number other sources also use for the same thing (a Transport Canada recall
    # number appears in `ca` and in the Canada-wide alerts): records of any type with the same
    # country and the same value here are shown as the same recall — linked, never merged.
    same_as_field: str | None = None
    url_fields: tuple[str, ...] = ("source_url",)   # http(s) only; anything else kept as text in extra
    # Which stored records of this type a source's detail phase (fetch_detail) completes by
    # default (a source may override `needs_detail`); None: every record.
    needs_detail: Callable[[Any], bool] | None = None

    def __post_init__(self) -> None:
        """A declaration that cannot work is refused when it is made, in one line that names
        the type and the field, not when a store first writes a record of it."""
        fields = set(self.model.model_fields)
        problems = []
        if not _IDENTIFIER.match(self.table or ""):
            problems.append(f"table {self.table!r} is not a plain SQL name")
        if not self.key:
            problems.append("key is empty")
        problems += [f"key field {name!r} is not in the model" for name in self.key if name not in fields]
        if self.date_field is not None and self.date_field not in fields:
            problems.append(f"date_field {self.date_field!r} is not in the model")
        for base in self.translated:
            problems += [f"translated {base!r} needs the field {name!r}" for name in (f"{base}_original", f"{base}_ko")
                         if name not in fields]
        known = fields | set(self.derived_columns) | {"source"}
        problems += [f"searchable {name!r} is not in the model" for name in self.searchable if name not in fields]
        problems += [f"heading {name!r} is neither a field nor a translated base" for name in self.heading
                     if name not in known and name not in self.translated]
        problems += [f"facet {f.field!r} is not a field" for f in self.facets if f.field not in known]
        problems += [f"facet {f.field!r}: also_text {f.also_text!r} is not a translated field"
                     for f in self.facets if f.also_text is not None and f.also_text not in self.translated]
        if self.same_as_field is not None and self.same_as_field not in known:
            problems.append(f"same_as_field {self.same_as_field!r} is not a field")
        reserved = {"id", "source", *BOOKKEEPING_COLUMNS} & (fields | set(self.derived_columns))
        problems += [f"{name!r} is a column the store keeps itself" for name in sorted(reserved)]
        problems += [f"{name!r} is not a plain SQL name" for name in sorted(fields | set(self.derived_columns))
                     if not _IDENTIFIER.match(name)]
        if problems:
            raise ValueError(f"record type {self.name!r}: " + "; ".join(problems))

    # ---- derived, no I/O ------------------------------------------------------------------
    @cached_property
    def original_columns(self) -> tuple[str, ...]:
        return tuple(f"{base}_original" for base in self.translated)

    @cached_property
    def korean_columns(self) -> tuple[str, ...]:
        return tuple(f"{base}_ko" for base in self.translated)

    @cached_property
    def key_columns(self) -> tuple[str, ...]:
        """The stored identity: the publishing source first, so two sources never collide."""
        return ("source", *self.key)

    @cached_property
    def data_columns(self) -> tuple[str, ...]:
        """Columns a crawl writes: `source`, every model field but the Korean ones (and
        `date_unknown` when the date is optional), derived columns."""
        fields = [name for name in self.model.model_fields if name not in self.korean_columns]
        if self.has_date_unknown and DATE_UNKNOWN not in fields:
            fields.insert(fields.index(self.date_field) + 1 if self.date_field in fields else len(fields), DATE_UNKNOWN)
        return ("source", *fields, *self.derived_columns)

    @cached_property
    def has_date_unknown(self) -> bool:
        return self.date_field is not None and self.date_optional

    @cached_property
    def column_types(self) -> dict[str, type]:
        """Every column of the type's table but `id`, with its SQL-facing Python type: data
        columns, the Korean columns beside their originals, then the bookkeeping."""
        kinds: dict[str, type] = {}
        for name in ("source", *self.model.model_fields, *self.derived_columns):
            if name in kinds:
                continue
            if name == "source":
                kinds[name] = str
            elif name in self.derived_columns:
                kinds[name] = self.derived_columns[name]
            else:
                kinds[name] = _column_type(self.model.model_fields[name].annotation)
            if name == self.date_field and self.has_date_unknown:
                kinds.setdefault(DATE_UNKNOWN, int)
        for name in self.korean_columns:
            kinds.setdefault(name, str)
        return {**kinds, **{k: v for k, v in BOOKKEEPING_COLUMNS.items() if k not in kinds}}

    @cached_property
    def json_columns(self) -> tuple[str, ...]:
        """Data columns holding JSON text: dict / list fields (`extra`, multi-valued facets)."""
        multi = {f.field for f in self.facets if f.multi}
        return tuple(name for name in self.model.model_fields if name in self.data_columns
                     and (name in multi or _is_json(self.model.model_fields[name].annotation)))

    @cached_property
    def date_columns(self) -> tuple[str, ...]:
        """Model fields holding a date (stored as ISO text)."""
        return tuple(name for name, info in self.model.model_fields.items()
                     if _unwrap(info.annotation) in (dt.date, dt.datetime))

    @cached_property
    def compared_columns(self) -> tuple[str, ...]:
        """What decides whether a stored row changed: data columns but the key and derived ones."""
        return tuple(c for c in self.data_columns if c not in self.key_columns and c not in self.derived_columns)

    @cached_property
    def text_index_columns(self) -> tuple[str, ...]:
        """Columns of the full-text index: every original / Korean pair, then `searchable`."""
        pairs = [column for pair in zip(self.original_columns, self.korean_columns) for column in pair]
        return (*pairs, *(c for c in self.searchable if c not in pairs))

    def facet(self, name: str) -> Facet | None:
        return next((f for f in self.facets if f.field == name), None)

    def facet_for_option(self, option: str) -> Facet | None:
        """The facet a named command-line option (`--manufacturer`) filters by, if declared."""
        return next((f for f in self.facets if f.option == option), None)

    def label(self, column: str) -> str:
        return self.labels.get(column, column.replace("_", " "))

    def best_text(self, row: Mapping[str, Any]) -> tuple[str | None, str | None]:
        """(Korean, original) of the first `display` base that has text: the line a screen shows
        for a record ("summary, else cause, else component"), translated when available, read
        as a reader is shown a pair (`as_read`)."""
        for base in self.display:
            original = row.get(f"{base}_original")
            korean = row.get(f"{base}_ko")
            if original or korean:
                return as_read(korean, original, row.get("source_lang"))
        return None, None

    def __hash__(self) -> int:   # frozen + mappings: hash by name, types are singletons by name
        return hash(self.name)


def _unwrap(annotation: Any) -> Any:
    """`X | None` → X (and Optional[X]); anything else as it is."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _unwrap(args[0])
    return annotation


def _is_json(annotation: Any) -> bool:
    inner = _unwrap(annotation)
    return inner in (dict, list) or typing.get_origin(inner) in (dict, list, tuple, set)


def _column_type(annotation: Any) -> type:
    inner = _unwrap(annotation)
    if inner is bool or inner is int:
        return int
    if inner is float:
        return float
    return str   # text, dates (ISO), JSON


class Record(NamedTuple):
    """A record of a named type, as `parse()` returns it when the type is not the source's
    default `record_type` (the EU source emits `Record("product_alert", {...})` beside its
    vehicle recalls). A plain dict is a record of the source's default type."""

    type: str
    fields: dict


def is_korean(lang: str | None) -> bool:
    """Whether a source language is Korean ("ko", "KO", "ko-KR"), as the translation worker
    tells the rows it never sends to a translator (translate/originals.py). A stored value that
    is no text (a row written by other hands) is no language."""
    if not isinstance(lang, str):
        return False
    lang = lang.lower()
    return lang == "ko" or lang.startswith("ko-")


def as_read(korean: Any, original: Any, source_lang: str | None) -> tuple[Any, Any]:
    """(the Korean, the original beneath it) of one translated pair as a reader is shown it,
    on every screen, mail and feed. An original written in Korean (a Korean publisher's) is its
    own Korean: never awaiting translation, before or after the translation step copies it;
    and a Korean equal to its original (that copy, a model name) is not said twice. Reading a
    pair twice gives the same pair."""
    if not korean and original and is_korean(source_lang):
        return original, None
    if korean and korean == original:
        return korean, None
    return korean, original
