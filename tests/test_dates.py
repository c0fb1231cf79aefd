"""basecrawler.formats.dates: the date formats the sources publish, and never a guessed date."""
import datetime as dt

import pytest

from basecrawler import Recall
from basecrawler.formats.dates import parse_date, parse_japanese_date

D = dt.date


@pytest.mark.parametrize("text, expected", [
    ("令和元年7月5日", D(2019, 7, 5)),
    ("令和６年９月６日", D(2024, 9, 6)),
    ("平成28年8月5日", D(2016, 8, 5)),
])
def test_japanese_era_dates_parse(text, expected):
    assert parse_japanese_date(text) == expected
    assert parse_date(text) == expected


def test_first_year_of_an_era_is_written_gannen():
    assert parse_date("令和元年5月1日") == D(2019, 5, 1)
    assert parse_date("平成元年1月8日") == D(1989, 1, 8)


def test_era_date_before_the_era_began_is_rejected():
    # 令和 began on 2019-05-01; 令和元年4月30日 was really 平成31年4月30日.
    assert parse_date("令和元年4月30日") is None
    assert parse_date("平成31年4月30日") == D(2019, 4, 30)


def test_japanese_date_with_spaces_and_weekday_parses():
    assert parse_date("令和 6 年 9 月 6 日（金）") == D(2024, 9, 6)


def test_western_year_with_japanese_units_parses():
    assert parse_date("2024年9月6日") == D(2024, 9, 6)


def test_nonexistent_japanese_date_is_none():
    assert parse_date("令和6年2月30日") is None


@pytest.mark.parametrize("text, expected", [
    ("24/03/2021", D(2021, 3, 24)),           # DD/MM/YYYY (NHTSA detail, EU)
    ("20240906", D(2024, 9, 6)),              # YYYYMMDD (NHTSA flat file)
    ("2024-09-06", D(2024, 9, 6)),            # ISO
    ("2024-09-06T05:00:00+09:00", D(2024, 9, 6)),
    ("2026-06-24T00:00:00.000", D(2026, 6, 24)),
    ("03/24/2021", D(2021, 3, 24)),           # US order, only one reading fits
])
def test_western_formats_parse(text, expected):
    assert parse_date(text) == expected


def test_ambiguous_slashed_date_follows_day_first_flag():
    assert parse_date("04/03/2021") == D(2021, 3, 4)
    assert parse_date("04/03/2021", day_first=False) == D(2021, 4, 3)


@pytest.mark.parametrize("text", ["31/02/2024", "20240231", "garbage", "", "19010101"])
def test_unparseable_or_sentinel_dates_are_none(text):
    assert parse_date(text) is None


def test_unparseable_recall_date_becomes_sentinel_with_date_unknown():
    record = Recall(country="JP", recall_number="1", recall_date="令和6年2月30日")
    assert record.recall_date == D(1970, 1, 1) and record.date_unknown is True
    assert record.extra["unparsed_recall_date"] == "令和6年2月30日"


@pytest.mark.parametrize("text, expected", [
    ("March 5, 2024", dt.date(2024, 3, 5)),
    ("5 March 2024", dt.date(2024, 3, 5)),
    ("Tuesday, 5 March 2024", dt.date(2024, 3, 5)),
    ("05 Mar 2024", dt.date(2024, 3, 5)),
    ("Sept 30, 2023", dt.date(2023, 9, 30)),
    ("31 February 2024", None),
    ("5 Foo 2024", None),
])
def test_month_name_dates(text, expected):
    assert parse_date(text) == expected


def test_us_slashed_dates_with_day_first_false():
    assert parse_date("03/05/2024", day_first=False) == dt.date(2024, 3, 5)
    assert parse_date("03/05/2024") == dt.date(2024, 5, 3)
