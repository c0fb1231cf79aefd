"""Placeholders: codes, names and glossary terms are swapped for ⟦n⟧ markers before a text
goes to a backend, and put back (or replaced by their fixed Korean) afterwards.

A backend cannot mistranslate what it never sees, so model codes, VINs, recall numbers, URLs
and do-not-translate names come back exactly as written, and glossary terms come back in
their glossary form, never contradicted.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from .glossary import Glossary

# Model codes, part numbers, recall ids: ASCII tokens mixing letters and digits ("24V-123",
# "F-150", "DBA-ZVW30", "1FTEW1EP5MKD12345"), plus URLs and e-mail addresses. Ordinals like
# "2nd" are words, not codes.
_CODE = (r"(?<![A-Za-z0-9])(?!\d+(?:st|nd|rd|th)(?![A-Za-z0-9]))"
         r"(?=[A-Za-z0-9./-]*[0-9])(?=[A-Za-z0-9./-]*[A-Za-z])"
         r"[A-Za-z0-9](?:[A-Za-z0-9./-]*[A-Za-z0-9])?(?![A-Za-z0-9])")
_URL = r"https?://[^\s<>\"]+[^\s<>\".,;:)]"
_EMAIL = r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
PROTECTED = re.compile(f"{_URL}|{_EMAIL}|{_CODE}")
PLACEHOLDER = re.compile(r"⟦\s*(\d+)\s*⟧")


@dataclass
class Masked:
    text: str                                   # what the backend sees
    slots: list[str] = field(default_factory=list)   # slot n → what ⟦n⟧ becomes in the output

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
            return slot(term.korean if term.korean is not None else match.group(0))
        text = regex.sub(glossary_slot, text)
    # Codes are protected after glossary terms so a glossary entry for a code wins.
    parts = PLACEHOLDER.split(text)   # keep existing markers out of the code scan
    rebuilt = []
    for index, part in enumerate(parts):
        if index % 2 == 1:
            rebuilt.append(f"⟦{part}⟧")
        else:
            rebuilt.append(PROTECTED.sub(lambda m: slot(m.group(0)), part))
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
