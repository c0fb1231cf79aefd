"""A type may keep its date as ISO text: the pipeline still windows it and judges its
plausibility, and text that is no date is neither dropped nor flagged."""
import datetime as dt

import pytest
from pydantic import BaseModel

from basecrawler import Store
from basecrawler.recordtypes import Record, RecordType, register_record_type
from basecrawler.recordtypes.registry import forget_registered_types
from test_unchanged_input import run


class TextDated(BaseModel):
    country: str
    notice_id: str
    notice_date: str | None = None
    title_original: str | None = None
    title_ko: str | None = None


TEXT_DATED = RecordType(name="text_dated", title="Text-dated notices", model=TextDated, table="text_dated",
                        key=("country", "notice_id"), date_field="notice_date", translated=("title",))


@pytest.fixture
def text_dated():
    """The type registered for this test only (registrations are process-wide)."""
    register_record_type(TEXT_DATED)
    yield TEXT_DATED
    forget_registered_types()


def test_text_dates_are_windowed_and_judged(tmp_path, text_dated):
    store = Store(tmp_path / "s.db")
    store.ensure_type_tables()
    items = [Record("text_dated", {"country": "XX", "notice_id": number, "notice_date": date})
             for number, date in (("old", "2020-01-01"), ("new", "2024-06-01"), ("far", "9999-12-31"), ("odd", "soon"))]
    result = run(store, items, mode="full", since=dt.date(2024, 1, 1))
    assert result.status == "succeeded", result.error
    assert result.counts.out_of_range == 1          # old
    stored = {row["notice_id"]: row for row in store.query("SELECT * FROM text_dated")}
    assert set(stored) == {"new", "far", "odd"}
    # 9999-12-31 is after tomorrow: stored date-unknown, never as a date; "soon" is no date: kept as it is.
    assert (stored["far"]["notice_date"], stored["far"]["date_unknown"]) == (None, 1)
    assert stored["odd"]["notice_date"] == "soon" and stored["new"]["notice_date"] == "2024-06-01"
