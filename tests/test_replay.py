"""--record saves every exchange; --replay serves them offline and fails clearly on a gap."""
import json

import pytest

from basecrawler import BaseCrawler, ReplayMiss
from basecrawler.fetch.replay import ReplayTransport, exchange_key, save_exchange
from basecrawler.testing import LoopbackServer, Reply


class PagedCrawler(BaseCrawler):
    source = "pg"
    country = "XX"
    endpoints = {"api": "https://api.example"}

    def fetch(self):
        page = 0
        while True:
            rows = self.http.get_json(self.url("api", f"/recalls.json?page={page}"))
            if not rows:
                return
            yield from rows
            page += 1

    def parse(self, raw):
        return {"recall_number": raw["id"], "recall_date": raw["date"]}


PAGES = {0: [{"id": "P1", "date": "2024-01-01"}], 1: [{"id": "P2", "date": "2024-01-02"}], 2: []}


def serve_pages(req):
    page = int(req.path.split("page=")[1])
    return Reply(200, body=json.dumps(PAGES[page]), headers={"Content-Type": "application/json"})


def test_record_then_replay_offline_gives_the_same_records(tmp_path, settings, monkeypatch):
    record_dir = tmp_path / "rec"
    with LoopbackServer(serve_pages) as server:
        monkeypatch.setenv("BASECRAWLER_PG_API_URL", server.url)
        recorded = PagedCrawler(str(tmp_path / "a.db"), settings=settings.with_(db_path=str(tmp_path / "a.db"),
                                record_dir=str(record_dir)), mode="full").run()
    # The server is gone: replay must not need it.
    replayed = PagedCrawler(str(tmp_path / "b.db"), settings=settings.with_(db_path=str(tmp_path / "b.db"),
                            replay_dir=str(record_dir)), mode="full").run()
    assert recorded.counts.new == replayed.counts.new == 2
    assert replayed.status == "succeeded"
    # Recorded behind the override, saved under the declared host (issue 21.2) ...
    assert [p.name for p in record_dir.iterdir()] == ["api.example"]
    # ... so the recording replays against the real URLs, no override set.
    monkeypatch.delenv("BASECRAWLER_PG_API_URL")
    real = PagedCrawler(str(tmp_path / "c.db"), settings=settings.with_(db_path=str(tmp_path / "c.db"),
                        replay_dir=str(record_dir)), mode="full").run()
    assert real.status == "succeeded" and real.counts.new == 2


def test_replay_of_a_request_not_recorded_fails_clearly(tmp_path, settings):
    save_exchange(tmp_path, "https://api.example/recalls.json?page=0", json.dumps(PAGES[0]),
                  headers={"Content-Type": "application/json"})
    result = PagedCrawler(settings.db_path, settings=settings.with_(replay_dir=str(tmp_path)), mode="full").run()
    assert result.status == "failed"
    assert "no recorded exchange" in result.error and "page=1" in result.error


def test_exchange_key_ignores_port_and_query_order():
    assert exchange_key("GET", "http://127.0.0.1:9/a?y=2&x=1") == exchange_key("GET", "http://127.0.0.1:7/a?x=1&y=2")[:1] + \
        exchange_key("GET", "http://127.0.0.1:7/a?x=1&y=2")[1:]
    assert exchange_key("GET", "https://h/a?x=1")[1] != exchange_key("GET", "https://h/a?x=2")[1]


def test_replay_transport_refuses_a_missing_directory(tmp_path):
    with pytest.raises(ReplayMiss):
        ReplayTransport(tmp_path / "absent")


def test_run_all_from_the_committed_replay_set_fills_every_source_offline(db_path, capsys):
    from pathlib import Path

    from basecrawler import Store
    from basecrawler.cli import main
    from basecrawler.pipeline.registry import discover

    replay = Path(__file__).resolve().parent.parent / "fixtures" / "replay"
    assert main(["--db", db_path, "run", "--all", "--replay", str(replay)]) == 0
    assert main(["--db", db_path, "run", "--all", "--replay", str(replay)]) == 0  # incremental after it
    from basecrawler.recordtypes import record_types

    store = Store(db_path)
    # A source may store records of any type (hc product alerts, pypi package releases).
    assert {source_id: sum(store.lookup.count(name, source_id) for name in record_types()) > 0
            for source_id in discover()} == {source_id: True for source_id in discover()}


def test_every_cli_command_is_documented_in_the_readme():
    from pathlib import Path

    from basecrawler.cli import build_parser

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    missing = [name for name in sub.choices if f"basecrawler {name}" not in readme]
    assert not missing, f"commands missing from README: {missing}"
