"""`search TEXT` without --type looks across every record type: it says which types matched
(Korean first) and, when the default type has nothing, shows the type that has."""
from pathlib import Path

from basecrawler.cli import main

REPLAY = str(Path(__file__).resolve().parent.parent / "fixtures" / "replay")


def _store_with_alerts_and_recalls(db):
    for source in ("hc", "us"):
        assert main(["--db", db, "-q", "run", "--source", source, "--mode", "full", "--replay", REPLAY]) == 0


def test_a_term_only_alerts_hold_finds_the_alerts_and_names_the_types(db_path, capsys):
    _store_with_alerts_and_recalls(db_path)
    capsys.readouterr()
    assert main(["--db", db_path, "search", "Listeria"]) == 0   # Korean by default
    out = capsys.readouterr().out
    assert "일치하는 제품 경보" in out and "90001" in out
    assert "찾은 곳: 제품 경보 " in out and "차량 리콜 0" in out
    assert main(["--db", db_path, "search", "Listeria", "--lang", "en"]) == 0
    out = capsys.readouterr().out
    assert "matching product alerts" in out and "90001" in out
    assert "Matched: Product alerts " in out and "Vehicle recalls 0" in out and "찾은 곳" not in out


def test_an_explicit_type_narrows_and_says_nothing_of_the_others(db_path, capsys):
    _store_with_alerts_and_recalls(db_path)
    capsys.readouterr()
    assert main(["--db", db_path, "search", "Listeria", "--type", "vehicle_recall", "--lang", "en"]) == 0
    out = capsys.readouterr().out
    assert "0 of 0 matching vehicle recalls" in out and "Matched" not in out
