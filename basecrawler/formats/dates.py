"""Date parsing shared by every source: ISO, DD/MM/YYYY, YYYYMMDD, US dates (MM/DD/YYYY with
day_first=False, "March 5, 2024"), month names ("5 March 2024"), Japanese eras.

`parse_date()` returns a `datetime.date` or None; it never guesses a date that does not exist
(31/02/2024 is None, not 2024-03-02). The model turns None into the 1970-01-01 sentinel with
`date_unknown=True`, so an unreadable date never drops a record.
"""
from __future__ import annotations

import datetime as dt
import re
import unicodedata

SENTINEL_DATE = dt.date(1970, 1, 1)

# First day of each era; year N of the era is (start year + N - 1).
JAPANESE_ERAS = {
    "令和": 2019, "R": 2019,
    "平成": 1989, "H": 1989,
    "昭和": 1926, "S": 1926,
}
# The day each era began: 令和元年4月30日 never existed (it was 平成31年), so such a date is
# rejected rather than guessed. Dates after an era ended are kept: forms printed before an era
# change were still filled in with the old era for a while.
_ERA_FIRST_DAY = {
    2019: dt.date(2019, 5, 1),
    1989: dt.date(1989, 1, 8),
    1926: dt.date(1926, 12, 25),
}

_ERA_RE = re.compile(
    r"(?P<era>令和|平成|昭和|[RHS])\s*(?P<year>元|\d{1,2})\s*[年.]\s*(?P<month>\d{1,2})\s*[月.]\s*(?P<day>\d{1,2})\s*日?"
)
_JA_WESTERN_RE = re.compile(r"(?P<year>\d{4})\s*年\s*(?P<month>\d{1,2})\s*月\s*(?P<day>\d{1,2})\s*日")
_ISO_RE = re.compile(r"^(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2})(?:[T ].*)?$")
_COMPACT_RE = re.compile(r"^(?P<year>\d{4})(?P<month>\d{2})(?P<day>\d{2})$")
_SLASHED_RE = re.compile(r"^(?P<a>\d{1,2})[/.-](?P<b>\d{1,2})[/.-](?P<year>\d{4})$")
_YMD_SLASHED_RE = re.compile(r"^(?P<year>\d{4})/(?P<month>\d{1,2})/(?P<day>\d{1,2})$")

# Flat-file sentinels meaning "no date" (NHTSA ODATE 19010101, zero dates).
_UNKNOWN_DATES = {"19010101", "00000000", "0000-00-00", "1901-01-01"}


def normalize_digits(text: str) -> str:
    """Full-width digits and punctuation (６, ／) to ASCII via NFKC."""
    return unicodedata.normalize("NFKC", text)


def _make(year: int, month: int, day: int) -> dt.date | None:
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


def parse_japanese_date(text: str) -> dt.date | None:
    """令和6年9月6日, 令和６年９月６日, 令和元年7月5日, 平成28年8月5日, 2024年9月6日."""
    s = normalize_digits(text)
    m = _ERA_RE.search(s)
    if m:
        year_in_era = 1 if m["year"] == "元" else int(m["year"])
        if year_in_era < 1:
            return None
        start_year = JAPANESE_ERAS[m["era"]]
        date = _make(start_year + year_in_era - 1, int(m["month"]), int(m["day"]))
        if date is None or date < _ERA_FIRST_DAY[start_year]:
            return None
        return date
    m = _JA_WESTERN_RE.search(s)
    if m:
        return _make(int(m["year"]), int(m["month"]), int(m["day"]))
    return None


def parse_date(value, *, day_first: bool = True) -> dt.date | None:
    """Parse the date formats the sources publish; None when it is not a real date.

    `day_first` decides ambiguous slashed dates: EU and NHTSA detail use DD/MM/YYYY (the
    default); pass False for US-style MM/DD/YYYY. A slashed date that only fits one order
    (13/01/2024 or 01/13/2024) is read in that order whatever the flag says.
    """
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str) and len(value) == 10 and value[4] == "-" and value.isascii():
        try:  # the common case first: a plain ISO date
            return dt.date.fromisoformat(value)
        except ValueError:
            pass
    s = normalize_digits(str(value)).strip()
    if not s or s in _UNKNOWN_DATES:
        return None
    if any(ch in s for ch in "年令平昭") or re.match(r"^[RHS]\d", s):
        return parse_japanese_date(s)
    for regex in (_ISO_RE, _COMPACT_RE, _YMD_SLASHED_RE):
        m = regex.match(s)
        if m:
            return _make(int(m["year"]), int(m["month"]), int(m["day"]))
    m = _SLASHED_RE.match(s)
    if m:
        a, b, year = int(m["a"]), int(m["b"]), int(m["year"])
        if a > 12 >= b:
            day, month = a, b
        elif b > 12 >= a:
            day, month = b, a
        elif day_first:
            day, month = a, b
        else:
            day, month = b, a
        return _make(year, month, day)
    if any(ch.isalpha() for ch in s):
        return _parse_month_name(s)
    try:
        return dt.datetime.fromisoformat(s).date()
    except ValueError:
        return None


_MONTHS = {name: index for index, names in enumerate(
    (("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",), ("jun", "june"),
     ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"), ("oct", "october"), ("nov", "november"),
     ("dec", "december")), start=1) for name in names}
# "5 March 2024", "Tuesday, 5 March 2024", "05 Mar 2024" (day first) and "March 5, 2024" (US).
_DAY_MONTH_NAME_RE = re.compile(r"^(?:[A-Za-z]+,?\s+)?(?P<day>\d{1,2})(?:st|nd|rd|th)?\s+(?P<month>[A-Za-z]+)\.?,?\s+(?P<year>\d{4})$")
_MONTH_NAME_DAY_RE = re.compile(r"^(?:[A-Za-z]+,?\s+)?(?P<month>[A-Za-z]+)\.?\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<year>\d{4})$")


def _parse_month_name(s: str) -> dt.date | None:
    for regex in (_DAY_MONTH_NAME_RE, _MONTH_NAME_DAY_RE):
        m = regex.match(s)
        if m and m["month"].lower() in _MONTHS:
            return _make(int(m["year"]), _MONTHS[m["month"].lower()], int(m["day"]))
    return None


def utc_now_iso() -> str:
    """Current UTC time as ISO-8601 with an explicit offset (all stored timestamps use it)."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


# A recall date before this is a typo or a placeholder (no motor-vehicle recall predates it);
# one after tomorrow (tomorrow: time zones put a source a day ahead of UTC) is a placeholder
# like 9999-12-31 or a misprinted year. Either would wreck the incremental watermark.
EARLIEST_PLAUSIBLE_DATE = dt.date(1900, 1, 1)


_ONE_DAY = dt.timedelta(days=1)


def latest_plausible_date(today: dt.date) -> dt.date:
    return today + _ONE_DAY


def is_plausible_date(value: dt.date, today: dt.date) -> bool:
    """True when a recall could really carry this date: 1900-01-01 … tomorrow."""
    return EARLIEST_PLAUSIBLE_DATE <= value <= latest_plausible_date(today)
