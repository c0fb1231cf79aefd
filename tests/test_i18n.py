"""The reader's language: every message a reader can see has Korean in the catalogue (templates,
the reading side's modules, every record type's declared words), the templates hold no visible
English outside the catalogue, and what the web view derives from a declaration."""
import re
from pathlib import Path

import pytest

pytest.importorskip("babel", reason="Babel (the message catalogues) is not installed")

from basecrawler import i18n
from basecrawler.i18n.extract import TEMPLATES, messages
from basecrawler.reading.browse import default_columns
from basecrawler.recordtypes import record_types


def test_every_visible_message_has_korean():
    catalogue = i18n.catalogue("ko")
    missing = []
    for message, where in messages().items():
        entry = catalogue.get(message)
        text = entry.string if entry is not None else None
        if not text or (isinstance(text, tuple) and not all(text)):
            missing.append(f"{where}: {message!r}")
    assert missing == [], "fill these in basecrawler/i18n/locale/ko/LC_MESSAGES/basecrawler.po " \
                          "(python -m basecrawler.i18n.extract adds them)"


def _visible_text(template: str) -> str:
    text = re.sub(r"(?s)\{% block body_class %\}.*?\{% endblock %\}|&\w+;", " ", template)   # a class, entities
    text = re.sub(r"(?s)\{#.*?#\}|\{%.*?%\}|\{\{.*?\}\}", " ", text)
    text = re.sub(r"(?s)<(script|style)\b.*?</\1>", " ", text)
    return re.sub(r"(?s)<[^>]*>", " ", text)


def test_templates_show_no_word_outside_the_catalogue():
    # The language switch names the other language in its own words, by design.
    allowed = {"English", "한국어", "Datasette", "CSV", "SQL"}
    words = {path.name: set(re.findall(r"[A-Za-z][A-Za-z']+", _visible_text(path.read_text("utf-8")))) - allowed
             for path in TEMPLATES.glob("*.html")}
    assert {name: found for name, found in words.items() if found} == {}


def test_korean_by_default_english_on_request(monkeypatch):
    monkeypatch.delenv(i18n.ENV, raising=False)
    assert i18n.gettext("Apply") == "적용"
    assert i18n.gettext("Apply", "en") == "Apply"
    monkeypatch.setenv(i18n.ENV, "en")
    assert i18n.gettext("Vehicle recalls") == "Vehicle recalls"
    token = i18n.use("ko")
    try:
        assert i18n.gettext("Vehicle recalls") == "차량 리콜"
    finally:
        i18n.reset(token)


def test_korean_numbers_dates_and_relative_time():
    import datetime as dt
    assert i18n.ngettext("%(num)s record", "%(num)s records", 1234, "ko") == "1,234건"
    assert i18n.date("2024-07-01", "ko") == "2024년 7월 1일"
    now = dt.datetime(2024, 7, 4, 12, tzinfo=dt.timezone.utc)
    assert i18n.ago("2024-07-01T12:00:00+00:00", now, "ko") == "3일 전"
    assert i18n.ago("2024-07-01T12:00:00+00:00", now, "en") == "3 days ago"


def test_a_table_never_lists_the_best_texts_first_field_twice():
    for record_type in record_types().values():
        shown = default_columns(record_type)
        if record_type.display:
            assert f"{record_type.display[0]}_original" not in shown, record_type.name
            assert f"{record_type.display[0]}_ko" in shown


def test_every_type_declares_what_its_card_is_headed_by():
    assert all(record_type.heading for record_type in record_types().values())
