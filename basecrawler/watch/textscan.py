"""The terms of every watch found in the new records' texts in one pass of Python, instead of
a lookup in the store's text index per term.

A term of a search selects the records whose searched text holds it, letters compared
without case: on SQLite by the trigram index (FTS5's Unicode case folding) for 3+ characters
and by LIKE (ASCII case only) for shorter ones, on PostgreSQL by ILIKE (the database's
`lower`). The three folds agree on what this module answers, and only on that:

- a *plain* term: every character printable ASCII or without case (Korean, Japanese,
  Chinese, digits, signs): each engine folds it to its ASCII lower case;
- a *plain* text: no character whose lower case is, or holds, one a plain term can have
  (the Kelvin sign folds to `k`, `İ` to `i` + a dot): any other letter with a case folds,
  on every engine, to a letter with a case that is not ASCII, which no plain term holds.

So within plain texts a plain term matches exactly where its ASCII-lower-cased form is a
substring of a value's ASCII-lower-cased form (a term never holds whitespace: it cannot span
two values, which SQLite indexes apart and PostgreSQL joins with a space). Everything else —
a term with another letter (`Müller`, `ΣΟΦΙΑ`), a text with a letter that folds into ASCII, a
value that is not text — is left to the store (`TextScan.unsure`, `plain_term`), which
answers it as the search does.
"""
from __future__ import annotations

import bisect
import re

_ASCII_UPPER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_SEPARATOR = "\n"   # between words: whitespace, so no term holds it


def _caseless(ch: str) -> bool:
    return ch.lower() == ch and ch.upper() == ch and ch.casefold() == ch


def _plain_char(ch: str) -> bool:
    if ch.isascii():
        return "!" <= ch <= "~"
    return _caseless(ch) and ch.isprintable()


def folds_into_plain(ch: str) -> bool:
    """Whether some engine's fold turns `ch` into (or into a string holding) a character a
    plain term may hold: texts with one are left to the store. lower(): PostgreSQL's (İ → i
    and a dot); casefold() of one character: simple folding, as FTS5 folds (ſ → s); a fold to
    several characters (ß → ss) no engine here makes."""
    if ch.isascii() or _caseless(ch):
        return False
    folded = ch.lower() + (ch.casefold() if len(ch.casefold()) == 1 else "")
    return any(c.isascii() or _caseless(c) for c in folded if c != ch)


# Every such character (`folds_into_plain` over all of Unicode, which tests recompute; listed
# here since computing it costs a second).
FOLDS_INTO_PLAIN = "\u0130\u017f\u212a"
_RISKY = re.compile(f"[{FOLDS_INTO_PLAIN}]")


def plain_term(term: str) -> bool:
    """Whether this module answers `term` (module docstring)."""
    return bool(term) and all(_plain_char(ch) for ch in term)


def fold(text: str) -> str:
    return text.translate(_ASCII_UPPER)


class TextScan:
    """The searched texts of some records, to find plain terms in.

    `rows`: (id, text) per record, its searched values joined with whitespace. A term holds
    no whitespace (`str.split`, as `RecordFilter.terms`), so each occurrence lies inside one
    whitespace-separated word: the distinct words are searched, not the texts (they repeat:
    far fewer characters), and a word leads to the records holding it. Records with a
    character that folds into ASCII are left out and listed in `unsure`."""

    def __init__(self, rows):
        postings: dict[str, list[int]] = {}
        self.unsure: set[int] = set()
        for record_id, text in rows:
            text = text or ""
            if not text.isascii() and _RISKY.search(text):
                self.unsure.add(record_id)
                continue
            for word in set(fold(text).split()):
                postings.setdefault(word, []).append(record_id)
        self._postings = list(postings.values())
        self._starts, offset = [], 0
        for word in postings:
            self._starts.append(offset)
            offset += len(word) + len(_SEPARATOR)
        self._starts.append(offset)
        self._words = _SEPARATOR.join(postings)

    def ids(self, term: str) -> set[int]:
        """The scanned records holding the plain `term` (unsure ones aside)."""
        needle, words, starts, found = fold(term), self._words, self._starts, set()
        at = words.find(needle)
        while at >= 0:
            n = bisect.bisect_right(starts, at) - 1
            found.update(self._postings[n])
            at = words.find(needle, starts[n + 1])   # the next word: each word once
        return found
