"""Names from before record types, kept so existing imports work: the vehicle recall model
(`Recall`) and its helpers now live next to their declaration (record_types/vehicle_recall.py),
the generic field helpers in basecrawler/recordtypes/fields.py.

Every other name is looked up lazily, through the registry, in the module that declares the
default record type, so importing this module loads no record type by itself.
"""
from __future__ import annotations

import importlib

from basecrawler.recordtypes.fields import MAX_TEXT_CHARS, blank_to_none

_FROM_DECLARATION = {
    "TEXT_FIELDS": lambda rt: rt.translated,
    "ORIGINAL_COLUMNS": lambda rt: rt.original_columns,
    "KOREAN_COLUMNS": lambda rt: rt.korean_columns,
}
_FROM_TYPE_MODULE = ("Recall", "SENTINEL_DATE", "MODEL_YEAR_SENTINELS", "MAX_AFFECTED_UNITS", "parse_units",
                     "is_number_like", "normalize_model_year", "year_range")


def __getattr__(name: str):
    if name not in _FROM_DECLARATION and name not in _FROM_TYPE_MODULE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from basecrawler.recordtypes import get_record_type
    from basecrawler.recordtypes.registry import DEFAULT_RECORD_TYPE

    record_type = get_record_type(DEFAULT_RECORD_TYPE)
    if name in _FROM_DECLARATION:
        return _FROM_DECLARATION[name](record_type)
    return getattr(importlib.import_module(record_type.model.__module__), name)


__all__ = ["MAX_TEXT_CHARS", "blank_to_none", *_FROM_DECLARATION, *_FROM_TYPE_MODULE]
