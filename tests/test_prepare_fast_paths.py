"""records.prepare's fast paths (issue #23.2) decide as the slow rule does."""
import datetime as dt
from urllib.parse import urlsplit

from basecrawler import Recall
from basecrawler.pipeline import records
from basecrawler.recordtypes import get_record_type


def slow_is_web_link(url) -> bool:
    if not isinstance(url, str) or "://" not in url:
        return False
    try:
        return urlsplit(url.strip()).scheme.lower() in ("http", "https")
    except ValueError:
        return False


def test_web_link_fast_path_agrees_with_urlsplit():
    cases = ["http://a.example/x", "HTTPS://a.example", "  https://a.example/ ", "\x01http://a.example",
             "http://[broken", "http://a]b.example", "ftp://a.example", "javascript://x", "http:x://y",
             "https://ドメイン.example/", "https://a.example/\tb", "mailto:a@b", "", None, 3]
    for url in cases:
        assert records._is_web_link(url) is slow_is_web_link(url), url


def prepare(record, public_url):
    return records.prepare(get_record_type("vehicle_recall"), record, source="us", today=dt.date(2024, 6, 1),
                           public_url=public_url)


def test_links_that_do_not_move_leave_the_record_uncopied():
    record = Recall(country="US", recall_number="1", recall_date="2024-01-01", source_url="https://pub.example/r/1",
                    extra={"docs": [{"url": "https://pub.example/d.pdf"}], "n": 2})
    assert prepare(record, lambda url: records.rebase(url, [("http://127.0.0.1:9", "https://pub.example")])) is record


def test_links_on_the_override_move_to_the_public_host():
    record = Recall(country="US", recall_number="1", recall_date="2024-01-01", source_url="http://127.0.0.1:9/r/1",
                    extra={"docs": [{"url": "http://127.0.0.1:9/d.pdf"}, "text"], "n": 2})
    public = prepare(record, lambda url: records.rebase(url, [("http://127.0.0.1:9", "https://pub.example")]))
    assert public.source_url == "https://pub.example/r/1"
    assert public.extra == {"docs": [{"url": "https://pub.example/d.pdf"}, "text"], "n": 2}
