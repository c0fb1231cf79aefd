"""sources/pypi.py: a package index's update feed → package releases, each with its metadata; a release
whose metadata is not served yet is stored from the feed and asked again on later runs
(fixtures in fixtures/pypi/, written by make_fixtures.py)."""
import json
from pathlib import Path

import httpx
import pytest

from record_types.package_release import PackageRelease
from sources.pypi import PypiCrawler, rfc822_date

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "pypi"


class Registry:
    """MockTransport for a package index: the feed and the metadata documents on disk; the rest 404."""

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
    kw.setdefault("mode", "full")
    return PypiCrawler(store, settings=settings, transport=httpx.MockTransport(registry or Registry()), **kw)


def parsed(store, settings, registry=None) -> dict[str, PackageRelease]:
    """fetch → parse → the type's model, as the pipeline does (parse level)."""
    source = crawler(store, settings, registry)
    releases = {}
    for raw in source.fetch_items():
        release = PackageRelease.model_validate({"source_lang": source.source_lang, **source.parse_raw(raw)})
        releases[f"{release.name} {release.version}"] = release
    return releases


def stored(store) -> dict[str, dict]:
    rows = store.query("SELECT * FROM package_releases WHERE source = 'pypi'")
    return {f"{r['name']} {r['version']}": r for r in rows}


def ledger(store) -> dict[str, tuple[str, int]]:
    return {r["key"]: (r["state"], r["attempts"])
            for r in store.query("SELECT key, state, attempts FROM list_ledger WHERE source = 'pypi'")}


# ---- parse level ---------------------------------------------------------------------------------
def test_every_feed_item_is_a_release_with_name_version_summary_and_date(store, settings):
    releases = parsed(store, settings)
    assert list(releases) == ["quillmark 0.9.0b1", "tidewater 2.4.1", "lanternfish 1.0.0", "sqlite-ferret 0.3.2",
                              "mossgarden 5.0", "pyrrhic-units 0.0.7"]
    tide = releases["tidewater 2.4.1"]
    assert tide.registry == "pypi" and tide.summary_original == "Tide tables & harbour clocks for Python"
    assert tide.published_date.isoformat() == "2026-12-01"
    assert tide.source_url == "https://packages.example.org/project/tidewater/2.4.1/"


def test_metadata_adds_license_requires_python_and_files(store, settings):
    tide = parsed(store, settings)["tidewater 2.4.1"]
    assert tide.license == "MIT" and tide.requires_python == ">=3.9"
    assert tide.extra["files"] == 2 and tide.extra["packagetypes"] == ["bdist_wheel", "sdist"]


def test_metadata_fills_a_missing_summary_and_prefers_the_license_expression(store, settings):
    lantern = parsed(store, settings)["lanternfish 1.0.0"]
    assert lantern.summary_original == "A tiny async job queue" and lantern.license == "Apache-2.0"


def test_an_unreadable_pubdate_takes_the_first_upload_date_from_the_metadata(store, settings):
    moss = parsed(store, settings)["mossgarden 5.0"]
    assert moss.published_date.isoformat() == "2026-12-01" and not moss.date_unknown


def test_an_unreadable_pubdate_without_metadata_is_date_unknown_and_kept(store, settings):
    registry = Registry(metadata={})
    moss = parsed(store, settings, registry)["mossgarden 5.0"]
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


def test_a_title_without_a_version_is_a_parse_failure(store, settings):
    with pytest.raises(ValueError, match="not 'name version'"):
        crawler(store, settings).parse_raw({"title": "justaname", "link": None, "description": None, "pubDate": None})


# ---- runs: "not yet" is retried, never a dead letter, never gone at once ----------------------------
def test_a_release_whose_metadata_is_not_served_yet_is_stored_from_the_feed_and_waits(store, settings):
    result = crawler(store, settings).run()
    assert result.status == "succeeded", result.error
    releases = stored(store)
    assert len(releases) == 6 and result.counts.dead_lettered == 0
    quill = releases["quillmark 0.9.0b1"]
    assert quill["summary_original"] == "Markdown to print-ready PDF" and quill["license"] is None
    states = ledger(store)
    assert states["quillmark 0.9.0b1"] == ("failing", 1)
    assert {key: state for key, (state, _) in states.items() if key != "quillmark 0.9.0b1"} == \
        {key: "done" for key in releases if key != "quillmark 0.9.0b1"}


def test_metadata_served_later_completes_the_release_even_after_it_left_the_feed(store, settings):
    registry = Registry()
    crawler(store, settings, registry).run()
    # The feed moved on (only tidewater is left); quillmark's metadata is now served.
    feed = (FIXTURES / "updates.xml").read_text(encoding="utf-8")
    head, _, rest = feed.partition("<item>")
    tidewater = "<item>" + rest.split("<item>")[1]
    registry.feed = (head + tidewater.split("</channel>")[0] + "</channel></rss>\n").encode()
    quill = json.loads((FIXTURES / "metadata" / "tidewater-2.4.1.json").read_text())
    quill["info"].update(name="quillmark", version="0.9.0b1", license="MPL-2.0")
    registry.metadata["quillmark-0.9.0b1"] = json.dumps(quill).encode()
    result = crawler(store, settings, registry, mode="incremental").run()
    assert result.status == "succeeded", result.error
    assert stored(store)["quillmark 0.9.0b1"]["license"] == "MPL-2.0"
    assert result.counts.updated == 1 and ledger(store)["quillmark 0.9.0b1"][0] == "done"


def test_metadata_that_never_comes_is_given_up_only_after_the_last_attempt(store, settings):
    for attempt in range(1, 6):
        crawler(store, settings).run()
        assert ledger(store)["quillmark 0.9.0b1"] == ("failing" if attempt < 5 else "given_up", attempt)
    assert store.query("SELECT COUNT(*) AS n FROM package_releases WHERE name = 'quillmark'")[0]["n"] == 1


def test_metadata_answering_an_older_version_is_not_yet(store, settings):
    older = json.loads((FIXTURES / "metadata" / "tidewater-2.4.1.json").read_text())
    older["info"]["version"] = "2.4.0"
    registry = Registry(metadata={"tidewater-2.4.1": json.dumps(older).encode()})
    crawler(store, settings, registry).run()
    assert ledger(store)["tidewater 2.4.1"] == ("failing", 1)
    assert stored(store)["tidewater 2.4.1"]["license"] is None


def test_a_rerun_of_the_same_feed_writes_nothing(store, settings):
    crawler(store, settings).run()
    again = crawler(store, settings).run()
    assert again.counts.new == 0 and again.counts.updated == 0 and again.counts.unchanged == 6


def test_offline_replay_set_serves_pypi(db_path, capsys):
    from basecrawler.cli import main

    assert main(["--db", db_path, "run", "--source", "pypi", "--mode", "full",
                 "--replay", str(REPO / "fixtures" / "replay")]) == 0
    assert "pypi: fetched 6 → parsed 6" in capsys.readouterr().err
