"""basecrawler.formats.text.clean_text: squashing white space is the `\\s+` rule, every Unicode space."""
import re
import sys

from basecrawler.formats.text import clean_text
from basecrawler.formats.textcodec import repair_text

SPACES = "".join(chr(code) for code in range(sys.maxunicode + 1) if re.fullmatch(r"\s", chr(code)))


def squashed_by_the_regex(text):
    """clean_text(squash_space=True) as first written: mojibake repair, then `\\s+` as one space."""
    if not text.isascii():
        text = repair_text(text)[0]
    return re.sub(r"\s+", " ", text.replace("\xa0", " ")).strip() or None


def test_squashed_space_is_the_regex_rule_for_every_space_character():
    for space in SPACES:
        for text in (f"{space} a{space}{space}b {space}c{space}", f"Crème{space}brûlée", space * 3):
            assert clean_text(text, squash_space=True) == squashed_by_the_regex(text), hex(ord(space))
    assert "\xa0" in SPACES and "\x1f" in SPACES and len(SPACES) > 20


def test_absent_placeholders_and_blanks_are_none():
    assert clean_text("  Unknown ", absent={"unknown"}) is None
    assert clean_text(" \u3000 ", squash_space=True) is None
    assert clean_text(" kept ", absent=()) == "kept"
