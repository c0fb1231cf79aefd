"""Search over the FTS5 trigram index (3+ characters) with a LIKE fallback, and its filters."""
import datetime as dt
import json

import pytest

from basecrawler import Recall
from basecrawler.cli import main
from basecrawler.reading.search import RecallFilter, build_query, count, search
from basecrawler.store.engines.dialect import dialect_of


def _recall(country, number, date, **fields):
    lang = {"JP": "ja", "EU": "fr"}.get(country, "en")
    return Recall(country=country, recall_number=number, recall_date=date, source_lang=lang, **fields)


RECALLS = [
    _recall("JP", "JP-4980", "2024-03-14", manufacturer_original="トヨタ自動車株式会社", model_original="プリウス",
            summary_original="ブレーキホースが損傷し、制動力が低下するおそれがある。", model_year="2019-2021"),
    _recall("JP", "JP-5001", "2024-05-02", manufacturer_original="本田技研工業株式会社", model_original="フィット",
            summary_original="燃料ポンプのインペラが変形し、エンジンが停止するおそれがある。", model_year="2020"),
    _recall("US", "24V-101", "2024-02-20", manufacturer_original="Ford Motor Company", model_original="F-150",
            summary_original="The rear brake hose may rupture, reducing braking performance.", model_year="2021"),
    _recall("US", "24V-202", "2024-06-11", manufacturer_original="Toyota Motor Engineering", model_original="Tundra",
            summary_original="Fuel pump may fail; the engine can stall.", model_year="2022"),
    _recall("CA", "2024-150", "2023-11-30", manufacturer_original="Ford", model_original="Escape",
            summary_original="Brake fluid may leak from the master cylinder.", model_year="2018"),
]

KOREAN = {  # what the translator would have written for the Japanese brake recall
    "JP-4980": {"summary_ko": "브레이크 호스가 손상되어 제동력이 저하될 우려가 있다.", "manufacturer_ko": "도요타 자동차",
                "translated_at": "2024-03-15T00:00:00+00:00", "translation_status": "translated"},
}


@pytest.fixture
def filled(store):
    store.upsert("vehicle_recall", RECALLS, source="test")
    for number, fields in KOREAN.items():
        d = dialect_of(store)
        sets = ", ".join(f"{k} = {d.p}" for k in fields)
        store.write(lambda db: db.conn.execute(d.write(f"UPDATE recalls SET {sets} WHERE recall_number = {d.p}"),
                                               [*fields.values(), number]))
    return store


def numbers(store, **filters):
    return [r["recall_number"] for r in search(store.db.conn, RecallFilter(**filters), limit=100)]


def test_japanese_term_finds_japanese_original(filled):
    assert numbers(filled, text="ブレーキ") == ["JP-4980"]


def test_korean_term_finds_translated_row(filled):
    assert numbers(filled, text="브레이크") == ["JP-4980"]


def test_english_term_matches_substrings_case_insensitively(filled):
    assert numbers(filled, text="BRAKE") == ["24V-101", "2024-150"]


def test_three_character_terms_use_the_fts_index(filled):
    sql, _ = build_query(RecallFilter(text="ブレーキ"))
    assert "FROM [recalls_fts] WHERE [recalls_fts] MATCH" in sql


def test_two_character_japanese_term_falls_back_to_like(filled):
    sql, _ = build_query(RecallFilter(text="制動"))
    assert "MATCH" not in sql and "LIKE" in sql
    assert numbers(filled, text="制動") == ["JP-4980"]


def test_two_character_korean_term_finds_translation(filled):
    assert numbers(filled, text="브레") == ["JP-4980"]


def test_all_words_must_match(filled):
    assert numbers(filled, text="fuel stall") == ["24V-202"]
    assert numbers(filled, text="fuel brake") == []


def test_results_are_newest_first(filled):
    found = search(filled.db.conn, RecallFilter(), limit=100)
    dates = [r["recall_date"] for r in found]
    assert dates == sorted(dates, reverse=True) and len(found) == 5


def test_country_filter(filled):
    assert numbers(filled, countries=("jp",)) == ["JP-5001", "JP-4980"]


def test_manufacturer_filter_matches_original_or_korean(filled):
    assert numbers(filled, manufacturer="Engineering") == ["24V-202"]
    assert numbers(filled, manufacturer="도요타") == ["JP-4980"]


def test_manufacturer_filter_uses_the_normalised_key(filled):
    # "toyota" is TOYOTA, as are "Toyota Motor Engineering" and トヨタ自動車株式会社 (rule table);
    # "Ford Motor Company" finds the plain "Ford" of Canada as well.
    assert numbers(filled, manufacturer="toyota") == ["24V-202", "JP-4980"]
    assert numbers(filled, manufacturer="Ford Motor Company") == ["24V-101", "2024-150"]


def test_model_year_filter_matches_inside_a_range(filled):
    assert numbers(filled, year=2020) == ["JP-5001", "JP-4980"]
    assert numbers(filled, year=2022) == ["24V-202"]


def test_date_window_filter(filled):
    assert numbers(filled, since=dt.date(2024, 2, 1), until=dt.date(2024, 4, 1)) == ["JP-4980", "24V-101"]


def test_filters_combine(filled):
    assert numbers(filled, text="brake", countries=("US", "CA"), manufacturer="Ford", year=2021,
                   since=dt.date(2024, 1, 1)) == ["24V-101"]
    assert numbers(filled, text="ブレーキ", countries=("US",)) == []


@pytest.mark.parametrize("term", ["'; DROP TABLE recalls; --", 'brake"', '"', "NEAR(brake", "brake*", "a:b",
                                  "(", "-brake", "%", "_", "\\"])
def test_hostile_or_syntax_terms_are_plain_text(filled, term):
    # None of these strings occurs literally in the data: treated as text they match nothing,
    # while as FTS syntax `brake*` / `-brake` would match or raise, and the DROP would run.
    assert numbers(filled, text=term) == []
    assert filled.lookup.count("vehicle_recall") == 5


def test_like_wildcards_in_input_are_literal(filled):
    assert numbers(filled, text="%") == [] and numbers(filled, manufacturer="_") == []


def test_count_ignores_limit(filled):
    assert count(filled.db.conn, RecallFilter(text="brake")) == 2


def test_search_command_prints_json(filled, db_path, capsys):
    assert main(["--db", db_path, "search", "브레이크", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["recall_number"] for r in rows] == ["JP-4980"]


def test_search_command_table_aligns_wide_characters(filled, db_path, capsys):
    assert main(["--db", db_path, "search", "--lang", "en", "--country", "JP", "--limit", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("recall date") and "JP-5001" in lines[2]
    assert "1 of 2 matching vehicle recalls" in lines[-1]
    from basecrawler.reading.tables import display_width
    # the text column starts at the same terminal column in the heading and the CJK row
    heading_col = display_width(lines[0][:lines[0].index("text")])
    row = lines[2]
    text_start = row.index("燃料")
    assert display_width(row[:text_start]) == heading_col


def test_empty_korean_search_says_how_much_is_translated(filled, db_path, capsys):
    # 1 of the 5 recalls has Korean text; 연료 ("fuel") is in no Korean column yet.
    assert main(["--db", db_path, "search", "--lang", "en", "연료"]) == 0
    out = capsys.readouterr().out
    assert "0 of 0 matching vehicle recalls" in out
    assert "1 of 5 vehicle recalls translated" in out


def test_untranslated_hint_counts_only_the_filtered_recalls(filled, db_path, capsys):
    assert main(["--db", db_path, "search", "연료", "--country", "JP", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == []
    assert "1 of 2 vehicle recalls translated" in captured.err


def test_no_translation_hint_for_non_korean_or_when_all_translated(filled, db_path, capsys):
    assert main(["--db", db_path, "search", "--lang", "en", "zzzz"]) == 0
    assert "translated" not in capsys.readouterr().out
    filled.write(lambda db: db.conn.execute("UPDATE recalls SET translated_at = '2024-07-01T00:00:00+00:00'"))
    assert main(["--db", db_path, "search", "--lang", "en", "연료"]) == 0
    assert "translated" not in capsys.readouterr().out
