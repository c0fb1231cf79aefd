"""sources/eu.py (its parts eu_text, eu_report): the shortcuts of the report parse give what the general path gives."""
import pytest

from basecrawler.formats import text as text_rules
from sources import eu_report, eu_text


def general(value):
    """eu_text.clean_text without its plain-ASCII shortcut: the framework's cleaning + eu's quirks."""
    text = text_rules.clean_text(value, markup=True, squash_space=True)
    while text and text[:5].lower() == "null ":
        text = text[5:].lstrip()
    return None if not text or text.lower() in eu_text._ABSENT else text


@pytest.mark.parametrize("value", [
    "Motor vehicles", "  padded  ", "", " ", "Unknown", "UNKNOWN ", "null Risk of fire.", "null null x", "n/a", "-",
    "two  spaces", "tab\there", "line\nbreak", "<p>Brand</p>", "Tom & Jerry", "&nbsp;Brand", "µg/cm2", "MÃ¼ller",
    "a\x0bb", "a\x1fb", "Fiestas Guirca SL ", "null", "nullable", "x" * 300,
])
def test_clean_text_gives_what_the_general_cleaning_gives(value):
    assert eu_text.clean_text(value) == general(value)


def test_a_report_without_ampersand_or_control_character_skips_the_repair_pass(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(eu_report, "count_repairs", lambda *a, **k: calls.append(a) or type("R", (), {"notes": lambda s: []})())
    clean = tmp_path / "clean.xml"
    clean.write_text("<Safety-Gate><notifications><danger><![CDATA[Fire.]]></danger></notifications></Safety-Gate>")
    assert eu_report.repairs_needed(clean, "utf-8", "strict") == [] and calls == []


@pytest.mark.parametrize("body, note", [
    ("<a><b>Tom & Jerry</b></a>", "escaped 1 bare '&'"),
    ("<a><b>bell\x07</b></a>", "removed 1 control character(s)"),
])
def test_a_report_that_needs_the_repair_still_gets_it(tmp_path, body, note):
    path = tmp_path / "r.xml"
    path.write_text(body)
    assert any(n.startswith(note) for n in eu_report.repairs_needed(path, "utf-8", "strict"))


def test_an_ampersand_inside_cdata_goes_to_the_exact_check_which_repairs_nothing(tmp_path):
    path = tmp_path / "r.xml"
    path.write_text("<a><b><![CDATA[Tom & Jerry]]></b></a>")
    assert eu_report.may_need_repair(path, "utf-8", "strict") is True
    assert eu_report.repairs_needed(path, "utf-8", "strict") == []


def test_report_and_measure_dates_are_read_as_before():
    assert eu_text.iso_date("14/07/2026") == "2026-07-14"
    assert eu_text.iso_date("31/02/2026") is None and eu_text.iso_date("Unknown") is None
    assert eu_text._day_first("2026-07-14") == "14/07/2026"
