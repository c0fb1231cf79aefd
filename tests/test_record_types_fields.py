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
