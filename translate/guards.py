"""Mistranslation guards: checks a translation must pass before it is stored.

Each guard returns a short reason when it blocks (that text goes to `translation_note`) and
None when the translation may be stored. The checks, in order:
- the answer is not absurdly long for its source (checked first: every later check is linear
  in the answer at best, and a 10 MB answer must be refused before any of them reads it);
- the answer carries no markup, script, link or control character the source does not have
  (a tag, an entity, `javascript:`, a URL, a bidi override): such an answer is an injection or
  a model's artefact, never a translation, and is stored nowhere (translate/markup.py);
- protected terms (codes, names, glossary terms) all came back;
- every code of the source (model and part codes, acronyms like ECU or ＡＢＳ, any width) is in
  the output unchanged, compared in NFKC form;
- every number in the source (dates, units, years; separators ignored) is in the output;
- the output is not the source echoed back;
- the output is mostly Hangul, names and codes aside;
- no runaway repetition (a phrase looping four times or more that the source does not have);
- the output is not the same text two or more times over, and repeats no sentence the source
  does not repeat;
- the length ratio output / source is within bounds for the language pair (sources of 20
  characters or more);
- the output has at least a floor of letters for the letters of the source, per script, at
  any length (the ratio says nothing about a 14-character source cut to 2); a company's
  legal name alone has no floor, its short name is a fair rendering;
- a source of several sentences is not answered with clearly fewer.
"""
from __future__ import annotations

import re
import unicodedata
from collections import Counter

from . import markup
from .memory import normalize_text
from .protect import code_spans, codes, fold

MIN_HANGUL_SHARE = 0.5
# Korean is shorter than English or French in characters, longer than Japanese.
LENGTH_BOUNDS = {"ja": (0.5, 4.0), "zh": (0.5, 4.0)}
DEFAULT_LENGTH_BOUNDS = (0.25, 2.5)
MIN_LENGTH_FOR_RATIO = 20

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_REPEAT = re.compile(r"(.{2,80}?)(?:\s*\1){3,}", re.DOTALL | re.IGNORECASE)
_LATIN_WORD = re.compile(r"[A-Za-zÀ-ÿ][A-Za-zÀ-ÿ'’-]*")
_LOWER_WORD = re.compile(r"(?<![A-Za-zÀ-ÿ])[a-zà-ÿ]{2,}")


def check(source: str, output: str, source_lang: str | None, *, protected=(), lost=(), exempt=()) -> str | None:
    """The reason to block `output` as a translation of `source`, or None to accept it.

    `exempt`: source terms the glossary rendered in Korean, whose codes need not survive."""
    reason = markup.too_long(source, output) or markup.foreign_markup(source, output)
    if reason:
        return reason
    if lost:
        return "protected term lost: " + ", ".join(dict.fromkeys(lost))
    reason = _codes_kept(source, output, exempt)
    if reason:
        return reason
    for guard in (_numbers_kept, _not_echo, _mostly_hangul, _no_runaway_repetition, _not_repeated,
                  _length_ratio, _letter_floor, _sentences_kept):
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


# ---- codes -------------------------------------------------------------------------------
def _codes_kept(source, output, exempt=()):
    """Every code of the source must be in the output, whole, as many times: ECU → ECM or
    ４Ｖ２０ → 4B20 keep every digit and most of the length, so only this check sees them; and
    one of two ABS changed still leaves an ABS (the worker demands every masked slot back too)."""
    folded_output = unicodedata.normalize("NFKC", fold(output))
    # A glossary term rendered in Korean takes its codes with it ("ABS", "ABS module"), and
    # only those: "EV" stays required next to a term like "level sensor".
    skip = {code.casefold() for term in exempt for code in [unicodedata.normalize("NFKC", term), *codes(term)]}
    wanted = Counter(unicodedata.normalize("NFKC", source[a:b]) for a, b in code_spans(source))
    missing = []
    for code, count in wanted.items():
        if code.casefold() in skip:
            continue
        token = re.compile(r"(?<![A-Za-z0-9])" + re.escape(code) + r"(?=s?(?![A-Za-z0-9]))")
        if len(token.findall(folded_output)) < count:
            missing.append(code)
    if missing:
        return "code missing: " + ", ".join(missing)
    return None


# ---- repeated output ---------------------------------------------------------------------
# A 。 inside quotes (「点検してください。」と表示される) does not end the sentence.
_SENTENCE_END = re.compile(r"(?<=[。！？!?])(?![」』）)\]\"”’'])|(?<=[.])(?=\s|$)")
_MIN_REPEATED_SENTENCE = 6   # letters; shorter pieces ("예.") repeat innocently


def _compact(text: str) -> str:
    """Letters and digits only, case-folded: what two copies of a text share exactly."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", text).casefold() if ch.isalnum())


def _period(text: str) -> int:
    """The length of the shortest unit `text` is made of end to end (len(text) if none)."""
    return (text + text).find(text, 1) if text else 0


def _not_repeated(source, output, lang, protected):
    compact = _compact(output)
    unit = _period(compact)
    # A whole repeated twice or more: no length limit on the unit. A source that is itself
    # a repetition ("ガタガタ" → "덜컹덜컹") may be translated as one.
    if 1 < len(compact) and unit < len(compact) and _period(_compact(source)) == len(_compact(source)):
        return f"repeated output: the same text {len(compact) // unit} times"
    seen = set()
    source_sentences = [_compact(s) for s in sentences(source)]
    for sentence in sentences(output):
        key = _compact(sentence)
        if len(key) < _MIN_REPEATED_SENTENCE:
            continue
        if key in seen and len(source_sentences) == len(set(source_sentences)):
            return f"repeated sentence: {sentence.strip()[:30]!r}"
        seen.add(key)
    return None


# ---- truncation --------------------------------------------------------------------------
# The fewest output letters per source letter, by the source letter's script. A faithful
# Korean has about one syllable per kana or kanji (0.7-1.4) and one per two or three Latin
# letters (0.3-0.7); a translation cut to a fifth falls well under these floors.
LETTER_FLOORS = {"kana": 0.4, "han": 0.4, "latin": 0.17, "hangul": 0.4, "other": 0.17}


def _letters(text: str, protected) -> list[str]:
    """The letters of `text` outside codes and protected terms."""
    for term in sorted(protected, key=len, reverse=True):
        text = text.replace(term, " ")
    kept, end = [], 0
    for start, stop in code_spans(text):
        kept.append(text[end:start])
        end = stop
    kept.append(text[end:])
    return [ch for ch in "".join(kept) if unicodedata.category(ch).startswith("L")]


def _letter_script(ch: str) -> str:
    script = _script(ch)
    return "latin" if script == "other" and unicodedata.normalize("NFKC", ch).isascii() else script


# A company's legal name is often rendered by its short name (本田技研工業株式会社 → 혼다,
# Ford Motor Company → 포드): a name, not running text cut short, so no floor for it.
_COMPANY = re.compile(r"株式会社|有限会社|合同会社|[(（]株[)）]|(?<![A-Za-z])(?:Inc|LLC|Ltd|Co|Corp|Corporation|Company|"
                      r"GmbH|AG|S\.?A|S\.?p\.?A|B\.?V|N\.?V|Limited)(?![A-Za-z])")


def _is_company_name(text: str) -> bool:
    """A legal-form word, no 。, and at most one lower-case word ("BMW of North America, LLC"):
    a running sentence that names a company ("Ford Motor Company is recalling …") is not one."""
    return bool(_COMPANY.search(text)) and "。" not in text and len(_LOWER_WORD.findall(text)) <= 1


def _letter_floor(source, output, lang, protected):
    source_letters = _letters(source, protected)
    if not source_letters or _is_company_name(source):
        return None
    floor = sum(LETTER_FLOORS[_letter_script(ch)] for ch in source_letters)
    have = len(_letters(output, protected))
    if have < floor:
        return f"too short: {have} letters for {len(source_letters)} in the source (floor {floor:.1f})"
    return None


_ABBREVIATION = re.compile(r"(?:\b(?:[A-Z]|Mr|Mrs|Ms|Dr|No|Nos|Inc|Co|Corp|Ltd|St|approx|etc|e\.g|i\.e|vs|U\.S|Jan|Feb|Mar|Apr|"
                           r"Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec))\.$", re.IGNORECASE)


def sentences(text: str) -> list[str]:
    """`text` cut after 。！？!? (not before a closing quote or bracket) and after a full stop
    followed by a space or the end (not after an abbreviation like "No." or "Inc.", not
    inside 1.5)."""
    pieces, current = [], ""
    for part in _SENTENCE_END.split(text):
        current += part
        if current.strip() and not _ABBREVIATION.search(current.rstrip()):
            pieces.append(current)
            current = ""
    if current.strip():
        pieces.append(current)
    return [p for p in pieces if any(unicodedata.category(ch).startswith("L") for ch in p)]


def _sentences_kept(source, output, lang, protected):
    wanted = len(sentences(source))
    got = len(sentences(output))
    # A translator may merge a pair of sentences now and then in a long text, never most of them.
    if wanted >= 2 and got < wanted - wanted // 4:
        return f"sentences missing: {got} of {wanted}"
    return None
