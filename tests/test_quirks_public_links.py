"""Issue #13 point 11: with every endpoint overridden to a loopback server (a mirror, proxy or
test server), the stored links still name each source's public site: the override is
transport, not identity. Each loopback server answers from that host's replay folder."""
from __future__ import annotations

import json
from contextlib import ExitStack

from urllib.parse import urlsplit

from basecrawler.pipeline.registry import discover
from basecrawler.recordtypes import record_types
from quirks_support import cli, rows, replay_server

# (source, endpoint, public host whose replay folder the loopback server serves): every endpoint
# of every discovered source.
ENDPOINTS = [(source_id, name, urlsplit(base).hostname)
             for source_id, cls in sorted(discover().items()) for name, base in sorted(cls.endpoints.items())]


def links(value):
    """Every string in a JSON value that looks like a URL."""
    if isinstance(value, str):
        return [value] if "://" in value else []
    if isinstance(value, dict):
        return [link for item in value.values() for link in links(item)]
    if isinstance(value, list):
        return [link for item in value for link in links(item)]
    return []


def test_every_source_stores_public_links_behind_an_endpoint_override(tmp_path):
    db = tmp_path / "links.db"
    with ExitStack() as stack:
        env, servers = {}, []
        for source, endpoint, host in ENDPOINTS:
            servers.append(stack.enter_context(replay_server(host)))
            env[f"BASECRAWLER_{source.upper()}_{endpoint.upper()}_URL"] = servers[-1].url
        done = cli(db, "run", "--all", "--mode", "full", env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert all(server.requests for server in servers)   # every endpoint really went to its loopback server

    # Every record of every type, as (source, links): no stored link names the loopback server.
    every_type = [rows(db, f"SELECT source, source_url, extra FROM {t.table}") for t in record_types().values()]
    assert {r["source"] for table in every_type for r in table} == {source_id for source_id, _, _ in ENDPOINTS}
    for row in (r for table in every_type for r in table):
        every = links(json.loads(row["extra"] or "{}")) + [row["source_url"] or ""]
        assert not any("127.0.0.1" in link or "localhost" in link for link in every), (row["source"], every)

    stored = rows(db, "SELECT source, recall_number, source_url, extra FROM recalls")

    # What each source's links look like, written for the sources below (a new one is covered
    # by the loopback check above).
    by_source = {source_id: [] for source_id in ("us", "ca", "eu", "jp", "au")}
    for row in stored:
        by_source.setdefault(row["source"], []).append(row)
    # jp: the press pages and list PDFs named in the replayed feed, on the MLIT site.
    jp_extra = [json.loads(r["extra"]) for r in by_source["jp"]]
    assert {e["press_url"] for e in jp_extra} == {
        f"https://www.mlit.go.jp/report/press/jidosha08_hh_{n}.html" for n in ("005190", "005217", "005221", "005222")}
    assert {e["pdf_url"] for e in jp_extra} == {
        f"https://www.mlit.go.jp/report/press/content/{n}.pdf" for n in ("001759001", "001761650", "001761787", "001761801")}
    assert all(r["source_url"] == json.loads(r["extra"])["press_url"] for r in by_source["jp"])
    assert all(r["source_url"] == f"https://www.vehiclerecalls.gov.au/recalls/{r['recall_number'].lower()}"
               for r in by_source["au"])
    assert all(r["source_url"].startswith("https://ec.europa.eu/safety-gate-alerts/screen/webReport/alertDetail/")
               for r in by_source["eu"])
    assert all(r["source_url"].startswith("https://wwwapps.tc.gc.ca/") for r in by_source["ca"])
    assert all(r["source_url"].startswith("https://www.nhtsa.gov/") for r in by_source["us"] if r["source_url"])
