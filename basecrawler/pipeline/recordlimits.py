"""The structural limits of a validated record, checked before it is prepared (intake.py
`_prepared`): neither preparing (marshal, repr, the link walk) nor the store (its row, its hash:
`repr`, JSON) ever meets a value nested past them. Most containers a record holds are empty, a
short list of texts, a flat dict of texts or a list of such dicts: those are told within the
limits in C (`_flat`); anything else is walked (`jsonlimits.check`), which raises the item's
dead letter (too deep, too many, too long)."""
from __future__ import annotations

import datetime as dt
import types
import typing

from pydantic import BaseModel

from basecrawler.formats import jsonlimits

_CONTAINERS = frozenset((dict, list, tuple, set, frozenset))
_TEXT_ONLY = {str}
_TEXT_OR_NONE = {str, type(None)}
_DICT_ONLY = {dict}
_LIMITS = jsonlimits.DEFAULT_LIMITS
_join = "".join


def check_containers(record: BaseModel, every_field: bool) -> None:
    """Raise OverLimit when a container of `record` is past the structural limits. A record the
    model validated from a dict holds containers only in the fields its model declares as such
    (`container_fields`); one parse() handed over as an instance (`every_field`) may hold
    anything anywhere (model_construct validates nothing): all its values are looked at."""
    values = record.__dict__
    if every_field:
        held = values.values()
    else:
        names = _CONTAINER_FIELDS.get(record.__class__)
        held = map(values.get, names if names is not None else container_fields(record.__class__))
    for value in held:
        if value.__class__ in _CONTAINERS and value and not (_flat_dict(value) if value.__class__ is dict
                                                             else _flat(value)):
            jsonlimits.check(value)


def _flat_dict(value: dict) -> bool:
    """A dict of text keys and text (or None) values within the limits, told in C: every
    value's class is text or None, the keys joined (a TypeError unless each is text) and the
    values' texts together no longer than one text may be (a bound on each of them)."""
    try:
        return (len(value) <= _LIMITS.items and {*map(type, value.values())} <= _TEXT_OR_NONE
                and len(_join(value)) + len(_join(filter(None, value.values()))) <= _LIMITS.string)
    except TypeError:   # a key that is not text: walked
        return False


def _flat(value) -> bool:
    """Whether a container is within the structural limits without a walk: a list of texts,
    a flat dict of texts (`_flat_dict`), or a list of such dicts (two levels deep, far inside
    the depth limit). False only means "walk it" (jsonlimits.check)."""
    if value.__class__ is dict:
        return _flat_dict(value)
    if value.__class__ is not list or len(value) > _LIMITS.items:
        return False
    kinds = {*map(type, value)}
    if kinds == _TEXT_ONLY:
        return max(map(len, value)) <= _LIMITS.string
    return kinds == _DICT_ONLY and all(map(_flat_dict, value))


# Field types whose validated value is never a container (`container_fields`).
_SCALAR_TYPES = frozenset((str, int, bool, float, dt.date, dt.datetime, type(None)))
_CONTAINER_FIELDS: dict[type, tuple[str, ...]] = {}


def container_fields(model: type[BaseModel]) -> tuple[str, ...]:
    """The fields of a model whose validated value may be a container: all but those declared
    a plain scalar (`str`, `int`, `date`…, or one of them or None). Cached by model class."""
    names = _CONTAINER_FIELDS.get(model)
    if names is None:
        names = _CONTAINER_FIELDS[model] = tuple(
            name for name, field in model.model_fields.items() if not _scalar(field.annotation))
    return names


def _scalar(annotation) -> bool:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return set(typing.get_args(annotation)) <= _SCALAR_TYPES
    return annotation in _SCALAR_TYPES


__all__ = ["check_containers", "container_fields"]
