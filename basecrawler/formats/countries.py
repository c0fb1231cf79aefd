"""Country names and codes: `--country Japan`, `--country jp`, `--country 日本` and `--country 독일`
all mean a code (`JP`, `DE`).

Records store the code their source declares (`recalls.country`: ISO 3166-1 alpha-2, plus
`EU` for the EU Safety Gate), or each record its own (a portal of many jurisdictions, such as
OECD GlobalRecalls). `country_code()` turns what a person types into that code, and refuses
what no registered source publishes with the list of what it knows, instead of a filter that
silently finds nothing. The names are CLDR's (Babel's territory names, in the languages our
readers and publishers write), with the other spellings publishers and people use beside them.
"""
from __future__ import annotations

import functools
import unicodedata
from typing import Iterable

from basecrawler.errors import ConfigError

# Languages whose territory names are recognised: the reader's (Korean), the publishers'.
NAME_LANGUAGES = ("en", "ko", "ja", "fr", "de")

# Other ways people and publishers write a country (matched after NFKC and case folding) than
# its name in NAME_LANGUAGES: abbreviations, older names, and OECD GlobalRecalls' jurisdiction
# names (its `dcterms:creator`: "Korea (Republic of)", "Chinese Taipei").
ALIASES: dict[str, str] = {
    "usa": "US", "u.s.": "US", "u.s.a.": "US", "united states of america": "US", "america": "US",
    "アメリカ": "US", "米国": "US", "미국": "US",
    "nippon": "JP", "일본": "JP",
    "호주": "AU",
    "europe": "EU", "eu": "EU", "欧州": "EU", "유럽": "EU", "유럽연합": "EU",
    "korea": "KR", "republic of korea": "KR", "korea (republic of)": "KR", "한국": "KR", "대한민국": "KR", "韓国": "KR",
    "uk": "GB", "great britain": "GB", "britain": "GB", "england": "GB",
    "chinese taipei": "TW",
}


# CLDR's two-letter codes that name no country a publisher could be ("Unknown Region", the
# pseudo-locales' regions, "Outlying Oceania", the eurozone, the United Nations).
NOT_COUNTRIES = frozenset(("ZZ", "XA", "XB", "QO", "EZ", "UN"))


def _fold(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


@functools.lru_cache(maxsize=1)
def _territories() -> tuple[dict[str, str], dict[str, str]]:
    """(code → English name, folded name → code) of every two-letter territory CLDR names
    (asked when a person filters by country, not at start-up)."""
    from babel import Locale

    english = {code: name for code, name in Locale("en").territories.items()
               if len(code) == 2 and code.isalpha() and code not in NOT_COUNTRIES}
    by_name: dict[str, str] = {}
    for language in NAME_LANGUAGES:
        for code, name in Locale(language).territories.items():
            if code in english:
                by_name.setdefault(_fold(name), code)
    by_name.update((_fold(alias), code) for alias, code in ALIASES.items())
    return english, by_name


def country_name(code: str, language: str = "en") -> str | None:
    """A two-letter code's name in `language` (CLDR's: "CA" → "Canada", in Korean "캐나다"),
    or None when it names no country."""
    if code not in _territories()[0]:
        return None
    return _names_in(language).get(code)


@functools.lru_cache(maxsize=8)
def _names_in(language: str) -> dict[str, str]:
    from babel import Locale

    return dict(Locale(language).territories)


def country_code(text: str, known: Iterable[str] | None) -> str:
    """The code for a country name or code (`"Japan"`, `"jp"`, `"日本"` → `"JP"`).

    `known`: the codes the registered sources publish (pipeline/registry.py
    `known_countries`); None when one of them publishes any country. A name or code outside
    it raises ConfigError (exit 2) listing the known ones."""
    names, by_name = _territories()
    folded = _fold(text or "")
    code = by_name.get(folded) or (folded.upper() if len(folded) == 2 and folded.isascii() and folded.isalpha()
                                   else None)
    if known is None:
        if code in names:
            return code
        raise ConfigError(f"unknown country {text!r}: give a name or a two-letter code (ISO 3166-1)")
    known = sorted(set(known))
    if code in known:
        return code
    listing = ", ".join(f"{c} ({names[c]})" if c in names else c for c in known) or "(none)"
    if code is None:
        raise ConfigError(f"unknown country {text!r}; known: {listing}")
    raise ConfigError(f"no source publishes country {code}"
                      f"{' (' + names[code] + ')' if code in names else ''}; known: {listing}")


def country_codes(values: Iterable[str] | None, known: Iterable[str] | None) -> tuple[str, ...]:
    """`--country` values (repeatable, comma-separated) → codes, in order, without repeats."""
    known = None if known is None else list(known)
    parts = [part.strip() for value in (values or []) for part in value.split(",") if part.strip()]
    return tuple(dict.fromkeys(country_code(part, known) for part in parts))


__all__ = ["country_code", "country_codes", "country_name", "ALIASES", "NAME_LANGUAGES"]
