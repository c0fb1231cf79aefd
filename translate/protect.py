"""Placeholders: codes, names and glossary terms are swapped for ⟦n⟧ markers before a text
goes to a backend, and put back (or replaced by their fixed Korean) afterwards.

A backend cannot mistranslate what it never sees, so model codes, VINs, recall numbers, URLs
and do-not-translate names come back exactly as written, and glossary terms come back in
their glossary form, never contradicted.

Codes are found in any width: the scan runs on the NFKC form of each character, so a Japanese
source's full-width ４Ｖ２０型 or ＡＢＳ is masked like 4V20 or ABS. The slot keeps the code as
the source wrote it, so the stored Korean always carries the source's own characters
(full-width stays full-width); `guards` compares codes in NFKC form, so an output that wrote
the same code in the other width still counts as keeping it.

Letter-only codes (ECU, ABS, EV, IC, SRS, VIN, DC-DC) are codes too. In running text (any
lower-case Latin letter, kana, kanji or Hangul) every all-capitals token of two or more
letters is one, bar a few words people shout (NOT, WARNING). In all-capitals text (NHTSA
component names like "ELECTRICAL SYSTEM:ECU") words and acronyms look alike, so only the
acronyms of KNOWN_ACRONYMS count there.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from .glossary import Glossary

# Model codes, part numbers, recall ids: ASCII tokens mixing letters and digits ("24V-123",
# "F-150", "DBA-ZVW30", "1FTEW1EP5MKD12345"), plus URLs and e-mail addresses. Ordinals like
# "2nd" and a number joined to a lower-case word ("12-volt", "4-wheel") are words, not codes:
# they are to be translated, and the number guard checks their digits.
_CODE = (r"(?<![A-Za-z0-9])(?!\d+(?:st|nd|rd|th)(?![A-Za-z0-9]))(?!\d+-[a-z]+(?![A-Za-z0-9./-]))"
         r"(?=[A-Za-z0-9./-]*[0-9])(?=[A-Za-z0-9./-]*[A-Za-z])"
         r"[A-Za-z0-9](?:[A-Za-z0-9./-]*[A-Za-z0-9])?(?![A-Za-z0-9])")
# Acronyms: two or more capitals, parts joined by - / & ("DC-DC", "CR-V"); a plural "s" stays
# outside ("ECUs" protects ECU).
_ACRONYM = r"(?<![A-Za-z0-9])[A-Z]{2,}(?:[-/&][A-Z]+)*(?=s?(?![A-Za-z0-9]))"
_URL = r"https?://[^\s<>\"]+[^\s<>\".,;:)]"
_EMAIL = r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
PROTECTED = re.compile(f"{_URL}|{_EMAIL}|{_CODE}")
_ANY_CODE = re.compile(f"{_URL}|{_EMAIL}|{_CODE}|(?P<acronym>{_ACRONYM})")
# All-capitals words in running text that are emphasis, not codes.
SHOUTED = frozenset("""AN AND ANY ALL ARE AS AT BE BY DO FOR IF IMMEDIATELY IN IS IT MAY MUST NO NOT OF
OFF ON ONLY OR OUT PARK SHOULD STOP THE TO UNTIL UP WARNING CAUTION DANGER NOTE IMPORTANT DRIVE
OUTSIDE REPAIR FREE URGENT""".split())
# Acronyms recognised in all-capitals text, where nothing else tells them from words.
KNOWN_ACRONYMS = frozenset("""ABS ACC ADAS AEB BCM BMS CVT DC-DC DPF DSG ECM ECU EGR EPB EPS ESC ESP EV EVAP FCW
HID HUD HV HVAC IC LDW LED LKA OBD PCM PHEV RCM SRS TCM TPMS USB VDC VIN VSC""".split())
_RUNNING_TEXT = re.compile(r"[a-z\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3]")
PLACEHOLDER = re.compile(r"⟦\s*(\d+)\s*⟧")


def fold(text: str) -> str:
    """`text` with each character in its NFKC form where that is one character (full-width
    ＡＢＳ４ → ABS4), so positions in the result are positions in `text`."""
    return "".join(n if len(n := unicodedata.normalize("NFKC", ch)) == 1 else ch for ch in text)


def code_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every code, URL, e-mail address and acronym in `text`, any width."""
    folded = fold(text)
    running = bool(_RUNNING_TEXT.search(folded))
    spans = []
    for match in _ANY_CODE.finditer(folded):
        if match.group("acronym") is not None:
            word = match.group(0)
            if (word in SHOUTED) if running else (word not in KNOWN_ACRONYMS):
                continue
        spans.append(match.span())
    return spans


def codes(text: str) -> list[str]:
    """The codes of `text` in NFKC form, in order."""
    return [unicodedata.normalize("NFKC", text[a:b]) for a, b in code_spans(text)]


@dataclass
class Masked:
    text: str                                   # what the backend sees
    slots: list[str] = field(default_factory=list)   # slot n → what ⟦n⟧ becomes in the output
    # Source terms the glossary gave a fixed Korean: their codes need not survive ("ABS" may be
    # a glossary term rendered in Hangul).
    replaced: list[str] = field(default_factory=list)

    @property
    def needs_backend(self) -> bool:
        """False when nothing but markers, numbers and punctuation is left to translate."""
        rest = PLACEHOLDER.sub("", self.text)
        return any(unicodedata.category(ch).startswith("L") for ch in rest)


def mask(text: str, glossary: Glossary | None, lang: str | None) -> Masked:
    masked = Masked(text)
    found = glossary.pattern(lang) if glossary else None

    def slot(replacement: str) -> str:
        masked.slots.append(replacement)
        return f"⟦{len(masked.slots) - 1}⟧"

    if found:
        regex, by_key = found

        def glossary_slot(match: re.Match) -> str:
            term = by_key[match.group(0).casefold()]
            if term.korean is not None:
                masked.replaced.append(match.group(0))
            return slot(term.korean if term.korean is not None else match.group(0))
        text = regex.sub(glossary_slot, text)
    # Codes are protected after glossary terms so a glossary entry for a code wins.
    parts = PLACEHOLDER.split(text)   # keep existing markers out of the code scan
    rebuilt = []
    for index, part in enumerate(parts):
        if index % 2 == 1:
            rebuilt.append(f"⟦{part}⟧")
        else:
            end = 0
            for start, stop in code_spans(part):   # the slot keeps the code as written
                rebuilt.append(part[end:start] + slot(part[start:stop]))
                end = stop
            rebuilt.append(part[end:])
    masked.text = "".join(rebuilt)
    return masked


def unmask(output: str, masked: Masked) -> tuple[str, list[str]]:
    """The output with every marker replaced; and the slots the backend lost."""
    seen: set[int] = set()

    def put_back(match: re.Match) -> str:
        number = int(match.group(1))
        if number >= len(masked.slots):
            return match.group(0)
        seen.add(number)
        return masked.slots[number]
    restored = PLACEHOLDER.sub(put_back, output)
    lost = [masked.slots[n] for n in range(len(masked.slots)) if n not in seen]
    return restored, lost
