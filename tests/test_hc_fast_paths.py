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


def glued_by_the_zero_width_rule(text):
    """clean_paragraphs' rule as first written: a space at every zero-width glued sentence end."""
    return re.sub(r"(?<=[a-z0-9)][.!?])(?=[A-Z][a-z])", " ", text)


@pytest.mark.parametrize("text", [
    "purchased.Health Canada", "Stop.Return it!Call us?Now", "a.B.Cd", "e.g. U.S.A.Then", "(see above).Consumers",
    "2024.Recalled", "Mr.X", "end.", ".Start", "x!Yy?Zz.Aa", "ÉTÉ.Été", "a..Bc", "z.\u00c9t",
])
def test_glued_sentences_are_spaced_where_the_zero_width_rule_spaced_them(text):
    assert hc.clean_paragraphs(text) == glued_by_the_zero_width_rule(hc.clean(text))


@pytest.mark.parametrize("text, number", [
    ("Transport Canada Recall - 2017213 - FORD", "2017213"), ("TRANSPORT CANADA RECALL NO. 2017213", "2017213"),
    ("Tranſport Canada recall # 2017213", "2017213"),   # IGNORECASE takes the long s for "s"
    ("Recall of lettuce 2017213", None),
])
def test_the_transport_canada_shortcut_finds_what_the_regex_finds(text, number):
    assert hc.tc_recall_number(text, None, "CFIA") == number


def test_repeated_fields_are_cleaned_as_each_value_alone_and_each_record_owns_its_categories():
    crawler = hc.HealthCanadaAlertsCrawler.__new__(hc.HealthCanadaAlertsCrawler)
    alert = {"NID": "1", "Title": "T", "Organization": " CFIA ", "Issue": "Listeria&nbsp;", "Category": "SUV - Car",
             "Recall class": "--", "Archived": "1"}
    first, second = crawler.parse(None, dict(alert)), crawler.parse(None, dict(alert))
    assert (first["authority"], first["hazard_original"], first["category"], first["risk_class"], first["archived"]) \
        == ("CFIA", "Listeria", ["SUV", "Car"], None, True)
    assert first["extra"] == {"recall_class_published": "--"}
    first["category"].append("changed")
    assert second["category"] == ["SUV", "Car"]
    # 1, 1.0 and True are one dict key but not one published text
    assert [crawler.parse(None, {**alert, "Recall class": value})["risk_class"] for value in ("1", 1, 1.0, True)] \
        == ["1", "1", "1.0", "True"]


def test_the_memo_of_repeated_fields_is_bounded(monkeypatch):
    monkeypatch.setattr(hc, "MEMO_MAX", 8)
    memo = hc._Memo(hc.clean)
    for n in range(50):
        assert memo.of(f" value {n} ") == f"value {n}"
    assert len(memo) <= 8


def test_fields_beyond_the_published_ones_still_go_to_extra_in_file_order():
    crawler = hc.HealthCanadaAlertsCrawler.__new__(hc.HealthCanadaAlertsCrawler)
    record = crawler.parse(None, {"NID": "1", "Zeta": "z", "Title": "T", "Alpha": "a", "Empty": "", "Recall class": "--"})
    assert list(record["extra"].items()) == [("Zeta", "z"), ("Alpha", "a"), ("recall_class_published", "--")]
