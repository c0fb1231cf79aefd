"""sources/pypi.py: the PyPI update feed → package releases, each release's metadata as the
second phase (fixtures in fixtures/pypi/, written by make_fixtures.py)."""
import json
from pathlib import Path

import httpx
import pytest

from basecrawler.errors import NotFound
from record_types.package_release import PackageRelease
from sources.pypi import PypiCrawler, rfc822_date

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "pypi"


class Registry:
    """MockTransport for pypi.org: the feed and the metadata documents on disk; the rest 404."""

    def __init__(self, feed: bytes | None = None, metadata: dict | None = None):
        self.feed = (FIXTURES / "updates.xml").read_bytes() if feed is None else feed
        self.metadata = metadata if metadata is not None else {
            p.stem: p.read_bytes() for p in (FIXTURES / "metadata").glob("*.json")}
        self.requests: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request.url.path)
        if request.url.path == "/rss/updates.xml":
            return httpx.Response(200, content=self.feed, headers={"content-type": "text/xml; charset=utf-8"})
        parts = request.url.path.strip("/").split("/")
        if len(parts) == 4 and parts[0] == "pypi" and parts[3] == "json":
            body = self.metadata.get(f"{parts[1]}-{parts[2]}")
            if body is not None:
                return httpx.Response(200, content=body, headers={"content-type": "application/json"})
        return httpx.Response(404, content=b'{"message": "Not Found"}', headers={"content-type": "application/json"})


def crawler(store, settings, registry=None, **kw):
    return PypiCrawler(store, settings=settings, transport=httpx.MockTransport(registry or Registry()), **kw)


def parsed(store, settings, registry=None) -> dict[str, PackageRelease]:
    source = crawler(store, settings, registry)
    releases = {}
    for raw in source.fetch():
        release = PackageRelease.model_validate({"source_lang": source.source_lang, **source.parse(raw)})
        releases[f"{release.name} {release.version}"] = release
    return releases


def test_every_feed_item_is_a_release_with_name_version_summary_and_date(store, settings):
    releases = parsed(store, settings)
    assert list(releases) == ["quillmark 0.9.0b1", "tidewater 2.4.1", "lanternfish 1.0.0", "sqlite-ferret 0.3.2",
                              "mossgarden 5.0", "pyrrhic-units 0.0.7"]
    tide = releases["tidewater 2.4.1"]
    assert tide.registry == "pypi" and tide.summary_original == "Tide tables & harbour clocks for Python"
    assert tide.published_date.isoformat() == "2026-12-01"
    assert tide.source_url == "https://pypi.org/project/tidewater/2.4.1/"
    assert releases["lanternfish 1.0.0"].summary_original is None


def test_an_unreadable_pubdate_is_date_unknown_and_kept(store, settings):
    moss = parsed(store, settings)["mossgarden 5.0"]
    assert moss.date_unknown and moss.published_date is None
    assert moss.extra["unparsed_published_date"] == "sometime on Tuesday"


@pytest.mark.parametrize("text,date", [
    ("Tue, 01 Dec 2026 22:10:05 GMT", "2026-12-01"),
    ("Tue, 01 Dec 2026 21:59:59 -0500", "2026-12-02"),     # the UTC date
    ("01 Dec 2026", None), ("", None), (None, None),
])
def test_rfc822_dates_become_utc_dates(text, date):
    parsed_date = rfc822_date(text)
    assert (parsed_date.isoformat() if parsed_date else None) == date


def test_metadata_adds_license_requires_python_and_files(store, settings):
    source = crawler(store, settings)
    fields = source.fetch_detail({"name": "tidewater", "version": "2.4.1", "summary_original": "x"})
    assert fields["license"] == "MIT" and fields["requires_python"] == ">=3.9"
    assert fields["extra"]["files"] == 2 and fields["extra"]["packagetypes"] == ["bdist_wheel", "sdist"]
    assert "summary_original" not in fields          # the feed's summary stays


def test_metadata_fills_a_missing_summary_and_date_and_prefers_the_license_expression(store, settings):
    source = crawler(store, settings)
    lantern = source.fetch_detail({"name": "lanternfish", "version": "1.0.0", "summary_original": None})
    assert lantern["summary_original"] == "A tiny async job queue" and lantern["license"] == "Apache-2.0"
    moss = source.fetch_detail({"name": "mossgarden", "version": "5.0", "summary_original": "x", "date_unknown": True})
    assert moss["published_date"] == "2026-12-01" and moss["date_unknown"] is False


def test_metadata_not_there_yet_is_not_found_for_the_ladder(store, settings):
    with pytest.raises(NotFound):
        crawler(store, settings).fetch_detail({"name": "quillmark", "version": "0.9.0b1"})


def test_metadata_answering_an_older_version_is_not_yet(store, settings):
    older = json.loads((FIXTURES / "metadata" / "tidewater-2.4.1.json").read_text())
    older["info"]["version"] = "2.4.0"
    registry = Registry(metadata={"tidewater-2.4.1": json.dumps(older).encode()})
    with pytest.raises(NotFound, match="not '2.4.1' yet"):
        crawler(store, settings, registry).fetch_detail({"name": "tidewater", "version": "2.4.1"})


def test_a_title_without_a_version_is_a_parse_failure(store, settings):
    with pytest.raises(ValueError, match="not 'name version'"):
        crawler(store, settings).parse({"title": "justaname", "link": None, "description": None, "pubDate": None})


def test_needs_detail_until_the_metadata_was_read():
    source = PypiCrawler.__new__(PypiCrawler)
    assert source.needs_detail(PackageRelease(registry="pypi", name="a", version="1"))
    assert not source.needs_detail(PackageRelease(registry="pypi", name="a", version="1", extra={"files": 0}))


# ---- end to end: the feed stored, the metadata on the ladder (the generic store) --------------------
class Clock:
    def __init__(self, start=1_796_164_800.0):   # 2026-12-01 22:40 UTC
        self.now = start

    def __call__(self):
        return self.now


def stored(store) -> dict[str, dict]:
    rows = store.query("SELECT * FROM package_releases WHERE source = 'pypi'")
    return {f"{r['name']} {r['version']}": r for r in rows}


# The enrichment ladder (basecrawler/enrichment.py) still keys its rows by (country,
# recall_number), which a package release does not have: the second phase cannot run until it
# keys by the type's declared key. Strict, so the day it works these markers must go.
LADDER_NOT_GENERIC = pytest.mark.xfail(strict=True, reason="enrichment ladder keys by (country, recall_number)")


@LADDER_NOT_GENERIC
def test_run_stores_every_release_and_the_ladder_adds_the_metadata(store, settings):
    clock = Clock()
    result = crawler(store, settings, clock=clock, mode="full").run()
    assert result.status == "succeeded", result.error
    releases = stored(store)
    assert len(releases) == 6
    assert releases["tidewater 2.4.1"]["license"] == "MIT"
    assert releases["lanternfish 1.0.0"]["summary_original"] == "A tiny async job queue"
    moss = releases["mossgarden 5.0"]
    assert moss["published_date"] == "2026-12-01" and not moss["date_unknown"]
    # Announced, metadata not served yet: waiting on the ladder, not gone.
    assert releases["quillmark 0.9.0b1"]["license"] is None
    states = {r["state"] for r in store.query("SELECT state FROM enrichment WHERE source = 'pypi'")}
    assert "gone" not in states and "retry" in states


@LADDER_NOT_GENERIC
def test_metadata_that_appears_later_is_added_by_a_later_run(store, settings):
    clock = Clock()
    registry = Registry()
    crawler(store, settings, registry, clock=clock, mode="full").run()
    quill = json.loads((FIXTURES / "metadata" / "tidewater-2.4.1.json").read_text())
    quill["info"].update(name="quillmark", version="0.9.0b1", license="MPL-2.0")
    registry.metadata["quillmark-0.9.0b1"] = json.dumps(quill).encode()
    clock.now += 16 * 60                              # past the first backoff (15 min)
    crawler(store, settings, registry, clock=clock).run()
    assert stored(store)["quillmark 0.9.0b1"]["license"] == "MPL-2.0"


def test_a_rerun_of_the_same_feed_writes_nothing(store, settings):
    clock = Clock()
    crawler(store, settings, clock=clock, mode="full").run()
    again = crawler(store, settings, clock=clock, mode="full").run()
    assert again.counts.new == 0 and again.counts.updated == 0 and again.counts.unchanged == 6


@LADDER_NOT_GENERIC
def test_offline_replay_set_serves_pypi(db_path, capsys):
    from basecrawler.cli import main

    assert main(["--db", db_path, "run", "--source", "pypi", "--mode", "full",
                 "--replay", str(REPO / "fixtures" / "replay")]) == 0
