"""The package-release source reads a package index the operator configures (issue 31 item 5,
issue 34 item 5): no public registry host anywhere in the repository, "not configured" in
`list` and skipped by `run` until BASECRAWLER_PYPI_INDEX_URL is set, and a feed's names never
choose the path that is requested."""
import json
from pathlib import Path

import httpx

from basecrawler.cli import main as cli_main
from basecrawler.pipeline.runner import run_sources
from basecrawler.testing import LoopbackServer, Reply, fast_settings
from sources.pypi import PypiCrawler

from test_pypi import Registry

REPO = Path(__file__).resolve().parents[1]
# Spelled in pieces so this file does not name them either.
REGISTRY_HOSTS = ["pypi" + ".org", "files." + "pythonhosted", "pypi" + ".python", "registry." + "npmjs",
                  "crates" + ".io", "rubygems" + ".org"]
SKIPPED_DIRS = {".git", ".venv", "__pycache__", "node_modules", ".pytest_cache"}


def test_no_file_of_the_repository_names_a_public_package_registry_host():
    found = []
    for path in REPO.rglob("*"):
        if not path.is_file() or SKIPPED_DIRS & set(path.relative_to(REPO).parts) or path.stat().st_size > 5_000_000:
            continue
        text = path.read_bytes().decode("utf-8", errors="ignore").lower()
        found += [f"{path.relative_to(REPO)}: {host}" for host in REGISTRY_HOSTS if host in text]
    assert found == []


def test_unconfigured_the_source_is_listed_not_configured_and_skipped_with_one_note(db_path, monkeypatch, capsys, caplog):
    monkeypatch.delenv("BASECRAWLER_PYPI_INDEX_URL", raising=False)
    caplog.set_level("INFO")
    summary = run_sources({"pypi": PypiCrawler}, settings=fast_settings(db_path))
    assert summary.ok and summary.results == [] and summary.not_configured == ["pypi"]
    assert summary.statuses() == {"pypi": "not_configured"}
    notes = [r for r in caplog.records if "pypi: skipped" in r.getMessage()]
    assert len(notes) == 1 and notes[0].levelname == "WARNING"
    assert notes[0].getMessage() == "pypi: skipped, not configured: set BASECRAWLER_PYPI_INDEX_URL"

    assert cli_main(["--db", db_path, "list", "--json"]) == 0
    row = next(r for r in json.loads(capsys.readouterr().out) if r["id"] == "pypi")
    assert row["configured"] is False and row["not_configured"] == "not configured: set BASECRAWLER_PYPI_INDEX_URL"
    assert cli_main(["--db", db_path, "run", "--source", "pypi"]) == 0   # not a failure


def test_configured_the_source_reads_that_index_under_its_path(db_path, monkeypatch, capsys):
    registry = Registry()

    def handler(request):
        assert request.path.startswith("/repository/py/")
        path = request.path.removeprefix("/repository/py")
        response = registry(httpx.Request("GET", "http://index" + path))
        return Reply(status=response.status_code, body=response.content, headers=dict(response.headers))

    with LoopbackServer(handler) as server:
        monkeypatch.setenv("BASECRAWLER_PYPI_INDEX_URL", server.url)
        monkeypatch.setenv("BASECRAWLER_PYPI_INDEX_PATH", "/repository/py/")
        assert cli_main(["--db", db_path, "list", "--json"]) == 0
        assert next(r for r in json.loads(capsys.readouterr().out) if r["id"] == "pypi")["configured"] is True
        summary = run_sources({"pypi": PypiCrawler}, settings=fast_settings(db_path), mode="full")
    assert summary.not_configured == [] and summary.results[0].counts.new == 6
    assert registry.requests[0] == "/rss/updates.xml" and "/pypi/tidewater/2.4.1/json" in registry.requests


HOSTILE_FEED = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>updates</title>
<item><title>../../etc/passwd 1.0</title><link>https://packages.example.org/x</link><description>a</description><pubDate>Tue, 01 Dec 2026 22:10:05 GMT</pubDate></item>
<item><title>a/b/c 2.0</title><link>https://packages.example.org/y</link><description>b</description><pubDate>Tue, 01 Dec 2026 22:10:05 GMT</pubDate></item>
<item><title>good 1.0/../../x</title><link>https://packages.example.org/z</link><description>c</description><pubDate>Tue, 01 Dec 2026 22:10:05 GMT</pubDate></item>
<item><title>tidewater 2.4.1</title><link>https://packages.example.org/project/tidewater/2.4.1/</link><description>Tide tables</description><pubDate>Tue, 01 Dec 2026 22:09:41 GMT</pubDate></item>
</channel></rss>"""


def test_a_feed_name_never_chooses_the_path_requested(store, settings):
    registry = Registry(feed=HOSTILE_FEED)
    crawler = PypiCrawler(store, settings=settings, mode="full", transport=httpx.MockTransport(registry))
    result = crawler.run()
    assert result.status == "succeeded"
    assert registry.requests == ["/rss/updates.xml", "/pypi/tidewater/2.4.1/json"]
    letters = store.query("SELECT kind, raw FROM dead_letters WHERE source = 'pypi' ORDER BY id")
    assert [r["kind"] for r in letters] == ["unreadable_item"] * 3
    assert [json.loads(r["raw"])["title"] for r in letters] == ["../../etc/passwd 1.0", "a/b/c 2.0", "good 1.0/../../x"]
    assert [r["name"] for r in store.query("SELECT name FROM package_releases")] == ["tidewater"]
    assert result.counts.dead_lettered == 3


def test_doctor_notes_the_unconfigured_index_and_never_probes_its_placeholder(db_path, monkeypatch):
    from basecrawler.commands.doctor import run_checks

    monkeypatch.delenv("BASECRAWLER_PYPI_INDEX_URL", raising=False)
    checks = {c.name: c for c in run_checks(fast_settings(db_path), sources={"pypi": PypiCrawler}, environ={})}
    index = checks["source pypi index"]
    assert index.ok and index.note and index.line() == \
        "– source pypi index: not configured: skipped by run — to set up: set BASECRAWLER_PYPI_INDEX_URL"
