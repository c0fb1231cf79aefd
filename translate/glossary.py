"""The glossary: fixed Korean for given source terms, and names that stay as they are.

A CSV file (path from BASECRAWLER_GLOSSARY or `translate --glossary`), one term a line:

    source,korean,lang
    airbag,에어백,en
    Ford Motor Company,포드 자동차,
    Takata,=,

`lang` is optional (blank: every language). A Korean cell of `=` or left empty puts the term
on the do-not-translate list: it is kept exactly as written. Latin terms match whole words,
case-insensitively; Japanese terms match as substrings. Lines starting with # are comments.
"""
from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass
from pathlib import Path

from basecrawler.errors import ConfigError

from .memory import normalize_text

KEEP_AS_IS = "="


@dataclass(frozen=True)
class Term:
    source: str
    korean: str | None      # None: do not translate, keep `source`
    lang: str | None        # None: any source language


class Glossary:
    def __init__(self, terms=()):
        self.terms: list[Term] = list(terms)
        self._patterns: dict[str, tuple[re.Pattern, dict[str, Term]] | None] = {}

    @classmethod
    def load(cls, path: str | Path) -> "Glossary":
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"glossary file not found: {path}")
        terms = []
        with path.open(encoding="utf-8-sig", newline="") as handle:
            for number, row in enumerate(csv.reader(handle), start=1):
                if not row or not row[0].strip() or row[0].lstrip().startswith("#"):
                    continue
                if number == 1 and row[0].strip().lower() == "source":
                    continue
                source = normalize_text(row[0])
                korean = normalize_text(row[1]) if len(row) > 1 else ""
                lang = row[2].strip().lower() if len(row) > 2 and row[2].strip() else None
                terms.append(Term(source, None if korean in ("", KEEP_AS_IS) else korean, lang))
        return cls(terms)

    def __len__(self) -> int:
        return len(self.terms)

    def pattern(self, lang: str | None):
        """(compiled alternation of the terms for `lang`, {casefolded term: Term}) or None."""
        key = lang or ""
        if key not in self._patterns:
            chosen = {t.source.casefold(): t for t in self.terms if t.lang in (None, lang)}
            if not chosen:
                self._patterns[key] = None
            else:
                alternatives = [_term_regex(t.source) for t in sorted(chosen.values(), key=lambda t: -len(t.source))]
                self._patterns[key] = (re.compile("|".join(alternatives), re.IGNORECASE), chosen)
        return self._patterns[key]

    def contradicted_by(self, source: str, translation: str, lang: str | None) -> bool:
        """True when a term in `source` is missing from `translation` in its fixed form."""
        found = self.pattern(lang)
        if not found:
            return False
        regex, by_key = found
        for match in regex.finditer(source):
            term = by_key[match.group(0).casefold()]
            expected = term.korean if term.korean is not None else match.group(0)
            if expected not in translation:
                return True
        return False


def _term_regex(term: str) -> str:
    escaped = re.escape(term)
    if term[:1].isascii() and term[:1].isalnum():
        escaped = r"(?<![A-Za-z0-9])" + escaped
    if term[-1:].isascii() and term[-1:].isalnum():
        escaped += r"(?![A-Za-z0-9])"
    return escaped


def glossary_from_env(environ=os.environ) -> Glossary | None:
    """The glossary BASECRAWLER_GLOSSARY names, or None when it is unset."""
    path = (environ.get("BASECRAWLER_GLOSSARY") or "").strip()
    return Glossary.load(path) if path else None
