"""Mistranslation guards: checks a translation must pass before it is stored.

Each guard returns a short reason when it blocks (that text goes to `translation_note`) and
None when the translation may be stored. The checks, in order:
- protected terms (codes, names, glossary terms) all came back;
- every number in the source (dates, units, years; separators ignored) is in the output;
- the output is not the source echoed back;
- the output is mostly Hangul, names and codes aside;
- no runaway repetition (a phrase looping four times or more that the source does not have);
- the length ratio output / source is within bounds for the language pair.
"""
from __future__ import annotations

import re
import unicodedata
from collections import Counter

from .memory import normalize_text

MIN_HANGUL_SHARE = 0.5
# Korean is shorter than English or French in characters, longer than Japanese.
LENGTH_BOUNDS = {"ja": (0.5, 4.0), "zh": (0.5, 4.0)}
DEFAULT_LENGTH_BOUNDS = (0.25, 2.5)
MIN_LENGTH_FOR_RATIO = 20

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_REPEAT = re.compile(r"(.{2,80}?)(?:\s*\1){3,}", re.DOTALL | re.IGNORECASE)
_LATIN_WORD = re.compile(r"[A-Za-zÀ-ÿ][A-Za-zÀ-ÿ'’-]*")
_LOWER_WORD = re.compile(r"(?<![A-Za-zÀ-ÿ])[a-zà-ÿ]{2,}")


def check(source: str, output: str, source_lang: str | None, *, protected=(), lost=()) -> str | None:
    """The reason to block `output` as a translation of `source`, or None to accept it."""
    if lost:
        return "protected term lost: " + ", ".join(dict.fromkeys(lost))
    for guard in (_numbers_kept, _not_echo, _mostly_hangul, _no_runaway_repetition, _length_ratio):
        reason = guard(source, output, source_lang, protected)
        if reason:
            return reason
    return None


# Fields that hold names: an unchanged name ("FORD MOTOR COMPANY", "Model 3") is a fine
# "translation". Anywhere else an unchanged phrase is an untranslated echo, capitals or not
# (NHTSA components come in ALL CAPS, subjects in Title Case).
NAME_FIELDS = frozenset({"manufacturer", "model"})


def echo_in_descriptive_field(field: str, source: str, output: str | None) -> str | None:
    """The reason to block `output` for `field` when it is the source phrase unchanged."""
    if output is None or field in NAME_FIELDS:
        return None
    if normalize_text(output).casefold() != normalize_text(source).casefold():
        return None
    if len(_LATIN_WORD.findall(source)) >= 2 or _has_sentence_content(source):
        return "echo of the source"
    return None


def numbers(text: str) -> Counter:
    """Numbers in `text` as digit strings without separators or leading zeros."""
    found = Counter()
    for match in _NUMBER.finditer(unicodedata.normalize("NFKC", text)):
        digits = re.sub(r"[.,]", "", match.group(0)).lstrip("0") or "0"
        found[digits] += 1
    return found


def _numbers_kept(source, output, lang, protected):
    missing = numbers(source) - numbers(output)
    if missing:
        return "number missing: " + ", ".join(sorted(missing))
    return None


def _has_sentence_content(text: str) -> bool:
    """Running text (lower-case words, kana, kanji) rather than a bare name or code."""
    if len(_LOWER_WORD.findall(text)) >= 2:
        return True
    return any(_script(ch) in ("kana", "han") for ch in text)


def _not_echo(source, output, lang, protected):
    if normalize_text(output).casefold() == normalize_text(source).casefold() and _has_sentence_content(source):
        return "echo of the source"
    return None


def _script(ch: str) -> str:
    code = ord(ch)
    if 0xAC00 <= code <= 0xD7A3 or 0x1100 <= code <= 0x11FF or 0x3130 <= code <= 0x318F:
        return "hangul"
    if 0x3040 <= code <= 0x30FF or 0x31F0 <= code <= 0x31FF or 0xFF66 <= code <= 0xFF9D:
        return "kana"
    if 0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF:
        return "han"
    return "other"


def _names_in(source: str, protected) -> set[str]:
    """Words of the source that are names: capitalised, all caps, or protected terms."""
    names = {w for w in _LATIN_WORD.findall(source) if w[0].isupper()}
    for term in protected:
        names.update(_LATIN_WORD.findall(term))
    return names


def _mostly_hangul(source, output, lang, protected):
    text = output
    for term in sorted(protected, key=len, reverse=True):
        text = text.replace(term, " ")
    names = _names_in(source, protected)
    text = _LATIN_WORD.sub(lambda m: " " if m.group(0) in names else m.group(0), text)
    letters = [ch for ch in text if unicodedata.category(ch).startswith("L")]
    if not letters:
        return None
    hangul = sum(1 for ch in letters if _script(ch) == "hangul")
    share = hangul / len(letters)
    if share < MIN_HANGUL_SHARE:
        return f"not Korean (Hangul {share:.0%} of letters)"
    return None


def _no_runaway_repetition(source, output, lang, protected):
    match = _REPEAT.search(output)
    # A source that itself repeats ("beep beep beep beep") may be translated with repetition.
    if match and not _REPEAT.search(source):
        return f"runaway repetition of {match.group(1).strip()[:30]!r}"
    return None


def _length_ratio(source, output, lang, protected):
    if len(source) < MIN_LENGTH_FOR_RATIO:
        return None
    low, high = LENGTH_BOUNDS.get((lang or "").lower(), DEFAULT_LENGTH_BOUNDS)
    ratio = len(output) / len(source)
    if not low <= ratio <= high:
        return f"length ratio {ratio:.2f} outside {low}-{high}"
    return None
