"""`extra_json` (recordtypes/upsert.py) writes what `json.dumps(sort_keys=True, ensure_ascii=False,
default=json_default)` writes, through an encoder made once, and refuses a value referring to
itself with a ValueError (a record fault the pipeline dead-letters), never a hang or a crash."""
from __future__ import annotations

import datetime as dt
import json

import pytest

from basecrawler.recordtypes.upsert import extra_json, json_default


@pytest.mark.parametrize("value", [
    {"recall_type": "Vehicle"},
    {"b": 1.5, "a": [1, None, True, float("nan"), float("inf"), -0.0, 10 ** 30], "c": {"z": "é\u2028\ud800\x00"}},
    {"bytes": b"\x00\xff", "date": dt.date(2020, 1, 2), "set": {3}, "tuple": (1, "x")},
    {1: "a", 2: "b"},
    [3, {"b": 1, "a": 2}],
])
def test_the_same_text_as_json_dumps(value):
    assert extra_json(value) == json.dumps(value, sort_keys=True, ensure_ascii=False, default=json_default)


def test_blank_values_are_none_and_text_is_kept():
    assert extra_json(None) is None and extra_json({}) is None and extra_json([]) is None
    assert extra_json('{"a": 1}') == '{"a": 1}'


def test_a_value_referring_to_itself_is_a_value_error():
    looped: dict = {}
    looped["self"] = looped
    with pytest.raises(ValueError):
        extra_json(looped)
    assert extra_json({"after": "fine"}) == '{"after": "fine"}'   # the encoder holds nothing of it


def test_mixed_key_types_are_refused_as_json_dumps_refuses_them():
    with pytest.raises(TypeError):
        extra_json({1: "a", "b": 2})
