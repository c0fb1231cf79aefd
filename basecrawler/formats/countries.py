"""Country names and codes: `--country Japan`, `--country jp` and `--country 日本` all mean `JP`.

Records store the code their source declares (`recalls.country`: ISO 3166-1 alpha-2, plus
`EU` for the EU Safety Gate). `country_code()` turns what a person types into that code, and
refuses what no registered source publishes with the list of what it knows, instead of a
filter that silently finds nothing.
"""
from __future__ import annotations

import unicodedata
from typing import Iterable

from basecrawler.errors import ConfigError

# Code → English name (shown in messages), for the codes a source publishes or may soon.
NAMES: dict[str, str] = {
    "AU": "Australia", "CA": "Canada", "EU": "European Union", "JP": "Japan", "US": "United States",
    "KR": "South Korea", "CN": "China", "DE": "Germany", "FR": "France", "GB": "United Kingdom",
    "NZ": "New Zealand", "IN": "India", "BR": "Brazil", "MX": "Mexico", "IT": "Italy", "ES": "Spain",
}

# Other ways people write them (matched after NFKC and case folding), English, native and Korean.
ALIASES: dict[str, str] = {
    "usa": "US", "u.s.": "US", "u.s.a.": "US", "united states of america": "US", "america": "US",
    "アメリカ": "US", "米国": "US", "미국": "US",
    "日本": "JP", "nippon": "JP", "일본": "JP",
    "캐나다": "CA", "カナダ": "CA",
    "호주": "AU", "オーストラリア": "AU",
    "europe": "EU", "eu": "EU", "欧州": "EU", "유럽": "EU", "유럽연합": "EU",
    "korea": "KR", "republic of korea": "KR", "한국": "KR", "대한민국": "KR", "韓国": "KR",
    "uk": "GB", "great britain": "GB", "britain": "GB", "england": "GB",
}


def _fold(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


_BY_NAME = {**{_fold(name): code for code, name in NAMES.items()}, **{_fold(a): c for a, c in ALIASES.items()}}


def known_countries() -> list[str]:
    """The codes the registered sources publish, sorted."""
    from basecrawler.pipeline.registry import discover

    return sorted({cls.country for cls in discover().values() if cls.country})


def country_code(text: str, known: Iterable[str] | None = None) -> str:
    """The code for a country name or code (`"Japan"`, `"jp"`, `"日本"` → `"JP"`).

    `known`: the codes that can match anything (default: those of the registered sources). A
    name or code outside it raises ConfigError (exit 2) listing the known ones."""
    known = sorted(set(known_countries() if known is None else known))
    folded = _fold(text or "")
    code = _BY_NAME.get(folded) or (folded.upper() if len(folded) == 2 and folded.isascii() and folded.isalpha()
                                    else None)
    if code in known:
        return code
    listing = ", ".join(f"{c} ({NAMES[c]})" if c in NAMES else c for c in known) or "(none)"
    if code is None:
        raise ConfigError(f"unknown country {text!r}; known: {listing}")
    raise ConfigError(f"no source publishes country {code}"
                      f"{' (' + NAMES[code] + ')' if code in NAMES else ''}; known: {listing}")


def country_codes(values: Iterable[str] | None, known: Iterable[str] | None = None) -> tuple[str, ...]:
    """`--country` values (repeatable, comma-separated) → codes, in order, without repeats."""
    known = list(known_countries() if known is None else known)
    parts = [part.strip() for value in (values or []) for part in value.split(",") if part.strip()]
    return tuple(dict.fromkeys(country_code(part, known) for part in parts))


__all__ = ["country_code", "country_codes", "known_countries", "NAMES", "ALIASES"]
