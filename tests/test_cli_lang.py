"""The commands a person reads speak the reader's language (issue 32): `search`, `status`,
`types` and the export headers in Korean by default, English with `--lang en` or
BASECRAWLER_LANG=en, through the catalogue the web view uses (basecrawler/i18n); --json keys and
CSV column names stay as they are. A Korean output holds no English word outside the names a
command takes (source ids, type and field names, table names) and the records' own text.
`status` counts a recall two publishers carry once (store/groups.py)."""
import csv
import json
import re
from pathlib import Path

import pytest

pytest.importorskip("babel", reason="Babel (the message catalogues) is not installed")

from basecrawler.cli import main
from basecrawler.recordtypes import record_types
from pgcluster import pg_cluster, pg_url  # noqa: F401  (fixtures)
from test_groups import Original, Republisher, crawl

REPLAY = str(Path(__file__).resolve().parent.parent / "fixtures" / "replay")
# Words of the command line itself, shown as the user types them, and proper names.
COMMAND_WORDS = {"type", "NAME", "limit", "basecrawler", "translate", "Python", "README", "Daily", "use"}


@pytest.fixture
def filled(db_path):
    for source in ("hc", "us"):
        assert main(["--db", db_path, "-q", "run", "--source", source, "--mode", "full", "--replay", REPLAY]) == 0
    # One recall published twice: the original and a republisher's copy of it.
    crawl(Original, db_path, [{"nid": "82438", "title": "Peanut butter recalled", "text": "Salmonella"}])
    crawl(Republisher, db_path, [{"country": "CA", "nid": "82438", "title": "Peanut butter (OECD)"}])
    return db_path


def run(capsys, *args):
    code = main(list(args))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def names() -> set[str]:
    """What a command takes by name and shows as it is: types, tables, fields, columns."""
    from basecrawler.pipeline.registry import discover

    found = set(COMMAND_WORDS) | set(discover()) | {Original.source, Republisher.source}
    for record_type in record_types().values():
        found |= {record_type.name, record_type.table, *record_type.data_columns, *record_type.key_columns,
                  *(f.field for f in record_type.facets), *record_type.display}
        found |= {column.removesuffix("_original") for column in record_type.data_columns}
    return found


def english_words(text: str, allowed: set[str]) -> set[str]:
    return {word for word in re.findall(r"[A-Za-z][A-Za-z_]{2,}", text) if word not in allowed}


# ---- status ------------------------------------------------------------------------------------
def test_status_in_korean_by_default_and_english_on_request(filled, capsys):
    korean = run(capsys, "--db", filled, "status")
    assert korean.startswith(f"데이터베이스 {filled}: 기록 ")
    assert "최근 실행 성공" in korean and "번역 대기" in korean and "합계" in korean
    english = run(capsys, "--db", filled, "status", "--lang", "en")
    assert english.startswith(f"database {filled}: ") and "last succeeded" in english and "total" in english
    assert "기록" not in english


def test_status_in_korean_shows_no_english_outside_names(filled, capsys):
    korean = run(capsys, "--db", filled, "status").replace(filled, "")
    assert english_words(korean, names()) == set()


def test_status_counts_a_republished_recall_once(filled, capsys):
    report = json.loads(run(capsys, "--db", filled, "status", "--json"))
    alerts = report["types"]["product_alert"]
    assert alerts["records"] == alerts["sources"]["hc"] + 2          # the original and its copy
    assert alerts["groups"] == alerts["records"] - 1                  # one recall, counted once
    assert report["groups"] == report["records"] - 1
    assert report["sources"]["repubdemo"]["copies"] == 1 and report["sources"]["repubdemo"]["groups"] == 0
    assert report["sources"]["origdemo"]["groups"] == 1
    records, groups = report["records"], report["groups"]
    english = run(capsys, "--db", filled, "status", "--lang", "en")
    assert f"{records} records, {groups} distinct recalls (a recall two publishers carry counts once)" in english
    assert "(1 of them another publisher's copy)" in english
    korean = run(capsys, "--db", filled, "status")
    assert f"기록 {records}건, 서로 다른 리콜 {groups}건" in korean and "(그중 1건은 다른 발행처 리콜의 사본)" in korean


def test_json_keys_stay_english_whatever_the_language(filled, capsys):
    korean = json.loads(run(capsys, "--db", filled, "status", "--json"))
    english = json.loads(run(capsys, "--db", filled, "status", "--json", "--lang", "en"))
    assert set(korean) == set(english) and "records" in korean and "groups" in korean
    assert korean["types"]["vehicle_recall"]["title"] == "Vehicle recalls"   # data, as declared
    types = json.loads(run(capsys, "--db", filled, "types", "--json"))
    assert {t["name"] for t in types} == set(record_types())


def test_the_environment_chooses_the_language_and_lang_overrides_it(filled, capsys, monkeypatch):
    monkeypatch.setenv("BASECRAWLER_LANG", "en")
    assert run(capsys, "--db", filled, "status").startswith("database ")
    assert run(capsys, "--db", filled, "status", "--lang", "ko").startswith("데이터베이스 ")
    monkeypatch.setenv("BASECRAWLER_LANG", "ko")
    assert run(capsys, "--db", filled, "types", "--lang", "en").split()[:2] == ["type", "title"]


# ---- types -------------------------------------------------------------------------------------
def test_types_in_both_languages(filled, capsys):
    korean = run(capsys, "--db", filled, "types")
    assert korean.split()[:5] == ["유형", "이름", "기록", "출처", "패싯"]
    assert "차량 리콜" in korean and "제품 경보" in korean and "필드: " in korean and "(한국어)" not in korean
    assert english_words(korean, names()) == set()
    english = run(capsys, "--db", filled, "types", "--lang", "en")
    assert english.split()[:5] == ["type", "title", "records", "sources", "facets"]
    assert "fields: " in english and "Vehicle recalls" in english


def test_types_without_a_database_says_so_in_the_language(tmp_path, capsys):
    missing = str(tmp_path / "none.db")
    assert "데이터베이스 없음" in run(capsys, "--db", missing, "types")
    assert "no database at" in run(capsys, "--db", missing, "types", "--lang", "en")


# ---- search ------------------------------------------------------------------------------------
def test_search_in_both_languages(filled, capsys):
    korean = run(capsys, "--db", filled, "search", "Listeria").splitlines()
    assert korean[0].split()[:2] == ["날짜", "국가"]
    assert any(line.startswith("일치하는 제품 경보 ") and line.endswith("건") for line in korean)
    assert any(line.startswith("찾은 곳: 제품 경보 ") for line in korean)
    shown = [korean[0], *(line for line in korean if line.startswith(("일치하는", "찾은 곳")))]
    assert english_words("\n".join(shown), names()) == set()
    english = run(capsys, "--db", filled, "search", "Listeria", "--lang", "en").splitlines()
    assert english[0].split()[:2] == ["date", "country"]
    assert any(" matching product alerts" in line for line in english)
    assert any(line.startswith("Matched: Product alerts ") for line in english)


def test_a_korean_query_over_untranslated_records_says_so_in_the_language(filled, capsys):
    korean = run(capsys, "--db", filled, "search", "화재")
    assert "한국어 검색어는 번역된 기록만 찾습니다" in korean
    english = run(capsys, "--db", filled, "search", "화재", "--lang", "en")
    assert "Korean words only find translated records" in english


# ---- export ------------------------------------------------------------------------------------
def test_xlsx_headers_are_the_declared_labels_in_the_readers_language(filled, tmp_path, capsys):
    from openpyxl import load_workbook

    def header(*extra):
        out = tmp_path / "out.xlsx"
        run(capsys, "--db", filled, "export", "-o", str(out), *extra)
        return [cell.value for cell in load_workbook(out).active[1]]

    korean, english = header(), header("--lang", "en")
    assert korean[:4] == ["국가", "리콜 번호", "리콜 날짜", "표시 내용 (번역되면 한국어)"]
    assert english[:4] == ["Country", "Recall number", "Recall date", "Text shown (Korean when translated)"]
    assert len(korean) == len(english)
    assert not [h for h in korean if re.search(r"[A-Za-z]{3,}", h.replace("UTC", ""))]


def test_csv_keeps_the_column_names_unless_labels_are_asked(filled, tmp_path, capsys):
    out = tmp_path / "out.csv"
    run(capsys, "--db", filled, "export", "-o", str(out), "--type", "product_alert")
    with out.open(encoding="utf-8-sig", newline="") as handle:
        names_row = next(csv.reader(handle))
    assert names_row[:4] == ["id", "source", "country", "alert_id"]
    run(capsys, "--db", filled, "export", "-o", str(out), "--type", "product_alert", "--headers", "labels")
    with out.open(encoding="utf-8-sig", newline="") as handle:
        labels_row = next(csv.reader(handle))
    assert labels_row[1:4] == ["출처", "국가", "경보 번호"] and len(labels_row) == len(names_row)
    assert not [h for h in labels_row if re.search(r"[A-Za-z]{3,}", h.replace("UTC", ""))]
    run(capsys, "--db", filled, "export", "-o", str(out), "--type", "product_alert", "--headers", "labels",
        "--lang", "en")
    with out.open(encoding="utf-8-sig", newline="") as handle:
        assert next(csv.reader(handle))[1:4] == ["Source", "Country", "Alert id"]


# ---- PostgreSQL: the same counts and lines -------------------------------------------------------
def test_status_on_postgresql_counts_groups_in_both_languages(pg_url, capsys):  # noqa: F811
    crawl(Original, pg_url, [{"nid": "82438", "title": "Peanut butter recalled"}])
    crawl(Republisher, pg_url, [{"country": "CA", "nid": "82438", "title": "Peanut butter (OECD)"}])
    report = json.loads(run(capsys, "--db", pg_url, "status", "--json"))
    assert (report["records"], report["groups"]) == (2, 1)
    assert report["sources"]["repubdemo"]["copies"] == 1
    assert "기록 2건, 서로 다른 리콜 1건" in run(capsys, "--db", pg_url, "status")
    assert "2 records, 1 distinct recalls" in run(capsys, "--db", pg_url, "status", "--lang", "en")
    from basecrawler.operations.offline import store_records
    assert store_records(pg_url) == 2
