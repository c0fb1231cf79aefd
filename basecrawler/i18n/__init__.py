"""The reader's language: one gettext catalogue per language (locale/<lang>/LC_MESSAGES/
basecrawler.po), Korean by default, English on request.

Message ids are the English text (the gettext convention), so a record type's declared title
and labels ("Vehicle recalls", "Model year") are looked up as they are declared; the Korean
catalogue gives their Korean. The .po files are the only source: they are compiled in memory
with Babel the first time a language is used (a fraction of a millisecond per catalogue), so
a fresh clone needs no build step and no compiled .mo can go stale beside its .po.

The language of a call: an explicit `lang`, else the one `use()` set for this context (the
web view sets it per request), else $BASECRAWLER_LANG, else Korean. Operator log lines stay
English and do not come through here.
"""
from __future__ import annotations

import contextvars
import datetime as dt
import gettext as _gettext
import io
import os
from functools import lru_cache
from pathlib import Path

from basecrawler.formats.countries import country_name

LANGUAGES = ("ko", "en")
DEFAULT = "ko"
DOMAIN = "basecrawler"
LOCALE_DIR = Path(__file__).parent / "locale"
ENV = "BASECRAWLER_LANG"

_current: contextvars.ContextVar[str | None] = contextvars.ContextVar("basecrawler_lang", default=None)


def normal(lang: str | None) -> str | None:
    """'ko', 'ko_KR.UTF-8', 'EN' → 'ko' / 'en'; anything else → None."""
    if not lang:
        return None
    short = str(lang).strip().lower().replace("-", "_").split("_")[0].split(".")[0]
    return short if short in LANGUAGES else None


def language(lang: str | None = None) -> str:
    return normal(lang) or _current.get() or normal(os.environ.get(ENV)) or DEFAULT


def use(lang: str | None) -> contextvars.Token:
    """Make `lang` the language of this context (a web request, a command); `reset(token)` undoes it."""
    return _current.set(normal(lang))


def reset(token: contextvars.Token) -> None:
    _current.reset(token)


def po_path(lang: str) -> Path:
    return LOCALE_DIR / lang / "LC_MESSAGES" / f"{DOMAIN}.po"


@lru_cache(maxsize=None)
def catalogue(lang: str):
    """The Babel catalogue of `lang` as read from its .po."""
    from babel.messages.pofile import read_po
    with po_path(lang).open("rb") as handle:
        return read_po(handle, locale=lang, domain=DOMAIN)


@lru_cache(maxsize=None)
def translations(lang: str) -> _gettext.NullTranslations:
    """`lang`'s catalogue compiled to gettext's form in memory (see the module docstring)."""
    from babel.messages.mofile import write_mo
    buffer = io.BytesIO()
    write_mo(buffer, catalogue(lang))
    buffer.seek(0)
    return _gettext.GNUTranslations(buffer)


def gettext(message: str, lang: str | None = None, **values) -> str:
    """`message` in the language; `%(name)s` placeholders filled from `values`."""
    text = translations(language(lang)).gettext(message) if message else message
    return text % values if values else text


_ = gettext


def ngettext(singular: str, plural: str, n: int, lang: str | None = None, **values) -> str:
    text = translations(language(lang)).ngettext(singular, plural, n)
    return text % {"num": number(n, lang), **values}


def number(value, lang: str | None = None) -> str:
    if value is None:
        return ""
    if isinstance(value, (int, float)):
        return _decimal(value, language(lang))
    from babel.numbers import format_decimal
    return format_decimal(value, locale=language(lang))


def country(code, lang: str | None = None) -> str:
    """A country code as the reader reads it: its name, the code beside it ("캐나다 (CA)" /
    "Canada (CA)"); a code CLDR does not name stays as it is."""
    if code in (None, ""):
        return ""
    name = country_name(str(code), language(lang))
    return f"{name} ({code})" if name else str(code)


def date(value, lang: str | None = None) -> str:
    """A date (or ISO text) as the language writes it: 2024년 7월 1일 / July 1, 2024."""
    day = _as_date(value)
    if day is None:
        return "" if value is None else str(value)
    return _long_date(day, language(lang))


# A page writes the same few counts and dates over and over (every row's date, every facet's
# count), and Babel works each out from the locale's patterns again: remembered, they cost a
# lookup. (A value, a language: bounded by maxsize.)
@lru_cache(maxsize=8192)
def _decimal(value, lang: str) -> str:
    from babel.numbers import format_decimal
    return format_decimal(value, locale=lang)


@lru_cache(maxsize=8192)
def _long_date(day: dt.date, lang: str) -> str:
    from babel.dates import format_date
    return format_date(day, format="long", locale=lang)


def ago(value, now: dt.datetime, lang: str | None = None) -> str:
    """How long before `now` a moment was: "3일 전" / "3 days ago"."""
    from babel.dates import format_timedelta
    moment = _as_datetime(value)
    if moment is None:
        return ""
    return format_timedelta(moment - now, add_direction=True, threshold=1.0, locale=language(lang))


def _as_date(value) -> dt.date | None:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value)[:10])
    except (TypeError, ValueError):
        return None


def _as_datetime(value) -> dt.datetime | None:
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, dt.date):
        moment = dt.datetime(value.year, value.month, value.day)
    else:
        try:
            moment = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except (TypeError, ValueError):
            return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)
