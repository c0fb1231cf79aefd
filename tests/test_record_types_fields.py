"""The field helpers every type's model uses (basecrawler/recordtypes/fields.py)."""
import datetime as dt

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from basecrawler.recordtypes.fields import MAX_TEXT_CHARS, Text, clean_strings, date_or_unknown


class Notice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    number: str
    published: dt.date | None = None
    title_original: Text
    extra: dict = {}

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data):
        return date_or_unknown(clean_strings(data), "published")


def test_blank_text_is_none_and_control_characters_go():
    notice = Notice(number=" N1 ", title_original="  \x07Kettle\r\nrecall\x00 ")
    assert (notice.number, notice.title_original) == ("N1", "Kettle\nrecall")
    assert Notice(number="N2", title_original="   ").title_original is None


def test_an_unreadable_date_is_unknown_with_the_published_text_kept_and_never_guessed():
    assert Notice(number="N1", title_original="t", published="31/02/2024").published is None
    notice = Notice(number="N1", title_original="t", published="31/02/2024")
    assert notice.extra == {"unparsed_published": "31/02/2024"}
    assert Notice(number="N1", title_original="t", published="令和6年9月6日").published == dt.date(2024, 9, 6)
    assert Notice(number="N1", title_original="t").extra == {}


def test_a_sentinel_date_sets_the_date_unknown_flag():
    data = date_or_unknown({"d": "never"}, "d", dt.date(1970, 1, 1))
    assert data == {"d": dt.date(1970, 1, 1), "date_unknown": True, "extra": {"unparsed_d": "never"}}


def test_runaway_text_is_refused():
    with pytest.raises(ValidationError):
        Notice(number="N1", title_original="x" * (MAX_TEXT_CHARS + 1))


def test_clean_strings_cleans_a_copy_and_keeps_every_other_value():
    given = {"a": "Kettle", "b": " Kettle\n", "c": "", "d": "  ", "e": "x\x00y\r\nz", "f": 5, "g": ["A", 1],
             "h": None, "i": {"k": " v "}}
    cleaned = clean_strings(given)
    assert cleaned == {"a": "Kettle", "b": "Kettle", "c": None, "d": None, "e": "xy\nz", "f": 5, "g": ["A", 1],
                       "h": None, "i": {"k": " v "}}
    assert given["b"] == " Kettle\n" and given["c"] == "" and cleaned is not given
    with pytest.raises(ValueError, match="inside a list"):
        clean_strings({"g": ["A", {"nested": "B"}]})


@pytest.mark.parametrize("published, stored", [("0", 0), ("007", 7), ("96310", 96310), ("999999999", 999_999_999),
                                               ("1000000000", 1_000_000_000), ("1000000001", None),
                                               ("2,700.00", 2700), ("９９", 99)])
def test_a_vehicle_count_reads_the_same_whichever_way_it_takes(published, stored):
    from basecrawler.recordtypes import get_record_type

    recall = get_record_type("vehicle_recall").model.model_validate(
        {"country": "US", "recall_number": "1", "recall_date": "2024-01-01", "affected_units": published})
    assert recall.affected_units == stored and (stored is None or recall.affected_units.__class__ is int)
    assert ("unparsed_affected_units" in recall.extra) == (stored is None)
