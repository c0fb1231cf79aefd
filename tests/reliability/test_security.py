"""Secrets stay secret and input never becomes SQL or a path."""
import gzip
import logging

from basecrawler import Store
from basecrawler.pipeline.registry import discover
from basecrawler.testing import LoopbackServer, Reply, fast_settings

from .universe import ReplayHandler, point_source_at

TOKEN = "tok-9f8e7d6c5b4a"


def everything_stored(store: Store, tmp_path) -> str:
    """All text the run left behind: every table, and every archived body."""
    dump = "\n".join(store.db.iterdump())
    for body in (tmp_path / "archive").rglob("*.gz"):
        dump += gzip.decompress(body.read_bytes()).decode("utf-8", "replace")
    return dump


def test_app_token_never_in_logs_dead_letters_or_archive(tmp_path, monkeypatch, caplog):
    replay = ReplayHandler()
    seen_tokens = []

    def handler(request):
        seen_tokens.append(request.headers.get("x-app-token"))
        if "campaignNumber=24V701000" in request.path:  # a detail that answers with an error page
            return Reply(200, body=b"<html><body>Error</body></html>", headers={"Content-Type": "text/html"})
        return replay(request)

    monkeypatch.setenv("BASECRAWLER_US_APP_TOKEN", TOKEN)
    db = str(tmp_path / "sec.db")
    store = Store(db)
    caplog.set_level(logging.DEBUG)
    with LoopbackServer(handler) as server:
        point_source_at(monkeypatch, discover()["us"], server.url)
        discover()["us"](store, settings=fast_settings(db), mode="full").run()
    assert TOKEN in seen_tokens                      # the token was really used
    assert store.dead_letters.open_dead_letters("us")             # and a failure was recorded
    assert TOKEN not in caplog.text
    assert TOKEN not in everything_stored(store, tmp_path)


def test_translation_key_never_in_logs_or_database(tmp_path, caplog):
    from translate.backends import backend_from_env
    from translate.worker import translate_pending

    db = str(tmp_path / "tr.db")
    store = Store(db)
    from basecrawler import Recall
    store.upsert("vehicle_recall", [Recall(country="XX", recall_number="1", recall_date="2024-01-01",
                                 summary_original="Brake hose may leak.")], source="xx")
    caplog.set_level(logging.DEBUG)
    with LoopbackServer(lambda req: Reply(403, body=b'{"message": "Wrong auth key"}')) as server:
        backend = backend_from_env({"BASECRAWLER_TRANSLATE_BACKEND": "deepl", "BASECRAWLER_DEEPL_API_KEY": TOKEN + ":fx",
                                    "BASECRAWLER_DEEPL_URL": server.url})
        report = translate_pending(store, backend)
        assert server.requests and TOKEN in server.requests[0].headers.get("authorization", "")
    assert report.backend_down
    assert TOKEN not in caplog.text and TOKEN not in report.summary_line()
    assert TOKEN not in everything_stored(store, tmp_path)


def test_search_terms_are_data_not_sql(store):
    from basecrawler import Recall
    from basecrawler.reading.search import RecallFilter, search
    store.upsert("vehicle_recall", [Recall(country="XX", recall_number="1", recall_date="2024-01-01",
                                 manufacturer_original="Acme", summary_original="Brake hose")], source="xx")
    for term in ("'; DROP TABLE recalls; --", '" OR 1=1 --', "brake' OR '1'='1", "NEAR(", "*", "x'"):
        assert search(store.db.conn, RecallFilter(text=term)) == []
        assert search(store.db.conn, RecallFilter(text="brake", manufacturer=term)) == []
    assert len(search(store.db.conn, RecallFilter(text="brake"))) == 1
    assert store.lookup.count("vehicle_recall") == 1
