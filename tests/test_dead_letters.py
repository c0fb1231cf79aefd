"""Dead letters keep the raw input; after a parser fix they are re-parsed without re-fetching."""
import json

from basecrawler.cli import main
from basecrawler.testing import LoopbackServer, Reply

from support import JsonFeedCrawler

FEED = [
    {"id": "D1", "date": "2024-02-01", "units": "10"},
    {"id": "D2", "date": "2024-02-02", "units": "about 40"},   # the old parser chokes on this
    {"id": "D3", "date": "2024-02-03", "units": "12"},
]


class StrictCrawler(JsonFeedCrawler):
    source = "dl"
    feed_path = "/feed.json"

    def parse(self, raw):
        return {"recall_number": raw["id"], "recall_date": raw["date"], "affected_units": int(raw["units"])}


class FixedCrawler(StrictCrawler):
    def parse(self, raw):
        units = "".join(ch for ch in raw["units"] if ch.isdigit())
        return {"recall_number": raw["id"], "recall_date": raw["date"], "affected_units": int(units)}


def test_parser_fixed_after_the_fact_stores_dead_letters_from_the_archive(store, settings, monkeypatch):
    with LoopbackServer(lambda req: Reply(200, body=json.dumps(FEED), headers={"Content-Type": "application/json"})) as server:
        monkeypatch.setenv("BASECRAWLER_DL_API_URL", server.url)
        result = StrictCrawler(store, settings=settings).run()
        requests_after_crawl = len(server.requests)
        assert result.counts.unparseable == 1 and store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "D2"}) is None
        letter = store.dead_letters.open_dead_letters("dl")[0]
        assert json.loads(letter["raw"]) == FEED[1]
        assert letter["response_sha256"]  # points at the archived feed body

        outcome = FixedCrawler(store, settings=settings).retry_dead_letters()
        assert len(server.requests) == requests_after_crawl  # nothing fetched again
    assert outcome == {"retried": 1, "resolved": 1, "still_failing": 0}
    assert store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "D2"})["affected_units"] == 40
    assert store.dead_letters.open_dead_letters("dl") == []


def test_retry_with_the_old_parser_keeps_the_letter_open(store, settings, monkeypatch):
    with LoopbackServer(lambda req: Reply(200, body=json.dumps(FEED), headers={"Content-Type": "application/json"})) as server:
        monkeypatch.setenv("BASECRAWLER_DL_API_URL", server.url)
        StrictCrawler(store, settings=settings).run()
    outcome = StrictCrawler(store, settings=settings).retry_dead_letters()
    assert outcome["still_failing"] == 1
    letter = store.dead_letters.open_dead_letters("dl")[0]
    assert letter["retry_count"] == 1 and "about 40" in letter["error"]


def test_dead_letters_cli_lists_as_json(store, settings, db_path, capsys):
    StrictCrawler(store, settings=settings).dead_letter({"id": "X"}, ValueError("broken row"), stage="parse")
    assert main(["--db", db_path, "dead-letters", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["source"] == "dl" and "broken row" in rows[0]["error"]


def test_dead_letters_cli_list_is_a_table_with_a_header_aligned_by_display_width(store, settings, db_path, capsys):
    crawler = StrictCrawler(store, settings=settings)
    crawler.dead_letter({"id": "X"}, ValueError("ブレーキ部品の不具合 " * 12), stage="parse", key="外装-1")
    crawler.dead_letter({"id": "Y"}, ValueError("broken row"), stage="parse", key="R-22")
    assert main(["--db", db_path, "dead-letters", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["id", "source", "stage", "kind", "state", "record", "key", "or", "URL", "error"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    # The error column starts at the same terminal column on every line, CJK cells included.
    from basecrawler.reading.tables import display_width
    header, cjk, latin = lines[0], next(l for l in lines if "外装-1" in l), next(l for l in lines if "R-22" in l)
    assert display_width(header[:header.index("error")]) == display_width(cjk[:cjk.index("ValueError")]) \
        == display_width(latin[:latin.index("ValueError")])
    assert cjk.endswith("…") and display_width(cjk) < 200     # long errors cut; --json has them whole
