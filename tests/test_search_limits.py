"""Search input limits (issue 22.6): a query larger than the engine safely answers is a usage
error (exit 2) naming the limit, not a "database error"; the limits themselves are answered;
`--limit` must be 1 or more."""
import pytest

from basecrawler import Recall
from basecrawler.cli import main
from basecrawler.reading.search import MAX_QUERY_CHARS, MAX_QUERY_TERMS, QueryTooLarge, RecallFilter, count, search


@pytest.fixture
def filled(store):
    store.upsert("vehicle_recall", [Recall(country="US", recall_number="24V-101", recall_date="2024-02-20", source_lang="en",
                                 manufacturer_original="Ford", model_original="F-150", model_year="2021",
                                 summary_original="The rear brake hose may rupture.")], source="test")
    return store


@pytest.mark.parametrize("command", ["search", "export"])
def test_more_words_than_the_limit_is_a_usage_error_naming_it(filled, db_path, tmp_path, command, capsys):
    words = ["brake"] * 1001          # the attack: SQLite's expression tree refuses this
    argv = ["search", *words] if command == "search" else ["export", "--text", " ".join(words), "-o",
                                                           str(tmp_path / "x.csv")]
    assert main(["--db", db_path, *argv]) == 2
    err = capsys.readouterr().err
    assert err == f"basecrawler: search text has 1,001 words; the limit is {MAX_QUERY_TERMS}\n"
    assert not (tmp_path / "x.csv").exists()


def test_more_characters_than_the_limit_is_a_usage_error_naming_it(filled, db_path, capsys):
    assert main(["--db", db_path, "search", "b" * (MAX_QUERY_CHARS + 1)]) == 2
    assert capsys.readouterr().err == (f"basecrawler: search text too long: {MAX_QUERY_CHARS + 1:,} characters; "
                                       f"the limit is {MAX_QUERY_CHARS:,}\n")


@pytest.mark.parametrize("word", ["br", "brake"], ids=["like-fallback", "trigram-index"])
def test_a_query_at_the_limit_is_answered_with_every_filter_set(filled, word):
    filters = RecallFilter(text=" ".join([word] * MAX_QUERY_TERMS), countries=("US", "JP"), manufacturer="Ford",
                           model="F-150", year=2021)
    assert [r["recall_number"] for r in search(filled.db.conn, filters)] == ["24V-101"]
    assert count(filled.db.conn, filters) == 1


def test_the_library_refuses_it_too(filled):
    with pytest.raises(QueryTooLarge):
        search(filled.db.conn, RecallFilter(text="brake " * (MAX_QUERY_TERMS + 1)))


@pytest.mark.parametrize("command", [["search", "brake"], ["export", "-o", "-"]])
@pytest.mark.parametrize("limit", ["0", "-1", "ten"])
def test_limit_must_be_a_positive_number(filled, db_path, command, limit, capsys):
    with pytest.raises(SystemExit) as info:
        main(["--db", db_path, *command, "--limit", limit])
    assert info.value.code == 2
    assert "--limit" in capsys.readouterr().err
