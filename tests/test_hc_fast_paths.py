"""sources/hc.py: the plain-text shortcut of `clean` gives what the general cleaning gives."""
import re

import pytest

from basecrawler.formats import text as text_rules
from sources import hc


def general(value):
    """hc.clean before its shortcuts: one regex decides whether the general cleaning runs."""
    text = str(value)
    if text.isascii() and not re.search(r"[&<\t\n\r\f\v]|  ", text):
        return text.strip() or None
    text = re.sub("[\u200b\u200c\u200d\u2060\ufeff]", "", text).replace("&nbsp;", " ")
    return text_rules.clean_text(text, markup=True, squash_space=True)


@pytest.mark.parametrize("value", [
    "Listeria", "  padded ", "", " ", "two  spaces", "tab\there", "a\x1fb", "a\x01b", "Tom &amp; Jerry", "<p>x</p>",
    "\u200bTitle", "Crème", "1", 20231, "purchased.Health Canada", "x&nbsp;y",
])
def test_clean_gives_what_the_general_cleaning_gives(value):
    assert hc.clean(value) == general(value)


@pytest.mark.parametrize("title, expected", [
    ("Transport Canada Recall - 2018339 - ", "Transport Canada Recall - 2018339"),
    ("Transport Canada Recall - 2018339 –", "Transport Canada Recall - 2018339"),
    ("Recall of A-B", "Recall of A-B"), ("Plain title", "Plain title"), ("-", "-"),
])
def test_a_title_loses_only_a_trailing_separator(title, expected):
    assert hc.clean_title(title) == expected
