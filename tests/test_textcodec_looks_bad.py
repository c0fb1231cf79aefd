"""`textcodec.looks_bad` answers as ftfy's `badness.is_bad` does, over text made of every
character ftfy's mojibake pattern names (so a text it lets through without ftfy is one ftfy
would have passed too), and the repair still happens on real mojibake."""
from __future__ import annotations

import random
import re

import ftfy.badness

from basecrawler.formats.textcodec import looks_bad, repair_text


def _alphabet() -> list[str]:
    pattern = ftfy.badness.BADNESS_RE.pattern
    chars = {char for char in pattern if not char.isascii()}
    for low, high in re.findall(r"([^\x00-\x7f])-([^\x00-\x7f])", pattern):   # the ranges, whole
        chars.update(map(chr, range(ord(low), ord(high) + 1)))
    chars.update(map(chr, range(0x80, 0xA0)))   # written as \x80-\x9f escapes in the pattern
    chars.update("éèàçêôûîïëùâœ«»’ \t\n.,:;!?-'\"aZz09")
    return sorted(chars)


def test_same_answer_as_ftfy_on_pairs_and_random_texts():
    alphabet = _alphabet()
    assert len(alphabet) > 300
    checked = 0
    for first in alphabet:
        for second in alphabet:
            for text in (first + second, f"a{first}{second}b", f"{first}{second} "):
                assert looks_bad(text) == ftfy.badness.is_bad(text), repr(text)
                checked += 1
    rng = random.Random(35)
    for _ in range(60_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 7)))
        assert looks_bad(text) == ftfy.badness.is_bad(text), repr(text)
    assert checked > 100_000


def test_plain_french_skips_ftfy_and_mojibake_is_still_repaired(monkeypatch):
    calls = []
    real = ftfy.badness.is_bad
    monkeypatch.setattr(ftfy.badness, "is_bad", lambda text: calls.append(text) or real(text))
    assert looks_bad("Sièges et dispositifs de retenue, véhicule à l'arrêt") is False
    assert calls == []          # no ftfy for text that cannot match
    assert repair_text("SiÃ¨ges et dispositifs de retenue") == ("Sièges et dispositifs de retenue", True)
    assert repair_text("MÃ¼ller") == ("Müller", True)
    assert calls                # mojibake went to ftfy
