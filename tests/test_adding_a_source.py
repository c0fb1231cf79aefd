"""The README's worked example of adding a source, followed step by step in a temporary folder
(issue 21.3): the module as the README prints it, a fixture, a replay recording made against a
local server, then the project's own per-source template (tests/test_every_source.py) run on
it — with no other file edited. Also: recording behind an override saves under the declared
host (21.2), and a one-URL source needs no `endpoints`."""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from basecrawler.testing import LoopbackServer, Reply

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
FIXTURE = {"recalls": [
    {"number": "XY-1", "date": "2024-03-05", "maker": "Acme", "model": "Z", "defect": "Brake hose may leak.",
     "remedy": "Replace the hose.", "units": "2,700"},
    {"number": "XY-2", "date": "5 April 2024", "maker": "フィアット", "model": "500", "defect": "Airbag label wrong.",
     "remedy": "New label.", "units": "12"},
]}


def readme_module() -> str:
    section = README.read_text(encoding="utf-8").split("### Worked example", 1)[1]
    return re.search(r"`sources/xy.py`:\n\n```python\n(.*?)```", section, re.S).group(1)


def _env(pythonpath: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BASECRAWLER_")}
    env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def test_the_readme_worked_example_passes_the_per_source_template(tmp_path):
    # 1. The module, dropped into a sources folder: a copy of the project's, plus the new file.
    root = tmp_path / "root"
    shutil.copytree(REPO / "sources", root / "sources", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "sources" / "xy.py").write_text(readme_module(), encoding="utf-8")

    # 2 + 3. The fixture served by a local server at the path the site uses; the run recorded
    # behind the endpoint override.
    body = json.dumps(FIXTURE).encode()
    replay = tmp_path / "replay"
    with LoopbackServer(lambda request: Reply(200, body, {"Content-Type": "application/json"})
                        if request.path == "/data/recalls.json" else Reply(404, b"no")) as server:
        recorded = subprocess.run(
            [sys.executable, "-m", "basecrawler", "--db", str(tmp_path / "xy.db"), "run", "--source", "xy",
             "--mode", "full", "--record", str(replay)],
            cwd=tmp_path, env=_env(root, BASECRAWLER_XY_DATA_URL=server.url), capture_output=True, text=True,
            timeout=120)
    assert recorded.returncode == 0, recorded.stderr
    assert [p.name for p in replay.iterdir()] == ["recalls.example.org"]      # the declared host, not 127.0.0.1
    meta = json.loads(next((replay / "recalls.example.org").glob("*.json")).read_text())
    assert meta["url"] == "https://recalls.example.org/data/recalls.json"

    # 4. The project's template, unedited, discovers the new source and passes it.
    template = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "tests" / "test_every_source.py"), "-k", "xy",
         "-p", "no:cacheprovider", "-rA"],
        cwd=tmp_path, env=_env(root, EVERY_SOURCE_REPLAY_DIR=str(replay), PYTHONDONTWRITEBYTECODE="1"),
        capture_output=True, text=True, timeout=300)
    assert template.returncode == 0, template.stdout[-3000:] + template.stderr[-2000:]
    assert re.search(r"PASSED \S*test_every_source.py::\w+\[xy\]", template.stdout), template.stdout[-2000:]
    assert re.search(r"\b1 passed\b", template.stdout), template.stdout[-2000:]


def test_a_one_url_source_derives_its_endpoint_and_resolves_the_override(monkeypatch, store, settings):
    namespace: dict = {}
    exec(readme_module(), namespace)
    crawler_class = namespace["ExampleListCrawler"]
    assert crawler_class.endpoints == {"data": "https://recalls.example.org"}
    body = json.dumps(FIXTURE).encode()
    with LoopbackServer(lambda request: Reply(200, body, {"Content-Type": "application/json"})) as server:
        monkeypatch.setenv("BASECRAWLER_XY_DATA_URL", server.url)
        crawler = crawler_class(store, settings=settings, mode="full")
        assert crawler.context.resolved(crawler.data_url) == server.url + "/data/recalls.json"
        result = crawler.run()
    assert result.status == "succeeded" and result.counts.new == 2
    assert server.requests[0].path == "/data/recalls.json"
    row = store.lookup.get("vehicle_recall", {"country": "XY", "recall_number": "XY-2"})
    assert row["source_url"] == "https://recalls.example.org/recall/XY-2" and row["affected_units"] == 12
    assert row["manufacturer_key"] == "FIAT"


def test_a_local_file_source_declares_no_endpoint(tmp_path, monkeypatch, store, settings):
    from basecrawler import BaseCrawler

    class FileCrawler(BaseCrawler):
        source = "fl"
        country = "FL"

        def fetch(self, ctx):   # as the README says: the path from a setting, BASECRAWLER_FL_FILE
            yield from json.loads(Path(ctx.setting("file")).read_text())["recalls"]

        def parse(self, ctx, raw):
            return {"recall_number": raw["number"], "recall_date": raw["date"]}

    data = tmp_path / "recalls.json"
    data.write_text(json.dumps(FIXTURE))
    monkeypatch.setenv("BASECRAWLER_FL_FILE", str(data))
    assert FileCrawler.endpoints == {}
    result = FileCrawler(store, settings=settings, mode="full").run()
    assert result.status == "succeeded" and result.counts.new == 2


def _readme_sources() -> list[tuple[str, ast.ClassDef]]:
    """Every source class the README prints in its Python examples, parsed."""
    found = []
    for block in re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S):
        try:
            tree = ast.parse(textwrap.dedent(block))
        except SyntaxError:   # a fragment (a record type's field list): no source class in it
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(getattr(base, "id", None) == "BaseCrawler" for base in node.bases):
                found.append((node.name, node))
    return found


def test_the_readmes_sources_are_written_on_the_run_context():
    # The README teaches the current API (issue #35.1): fetch(ctx) / parse(ctx, raw), and
    # nothing of the run reached through `self` (self.http, self.warn, self.settings …).
    sources = _readme_sources()
    assert {name for name, _ in sources} >= {"ExampleCrawler", "ExampleListCrawler"}
    for name, node in sources:
        methods = {item.name: [arg.arg for arg in item.args.args] for item in node.body
                   if isinstance(item, ast.FunctionDef)}
        assert methods.get("fetch") == ["self", "ctx"], (name, methods)
        assert methods.get("parse") == ["self", "ctx", "raw"], (name, methods)
        run_on_self = sorted({attribute.attr for attribute in ast.walk(node) if isinstance(attribute, ast.Attribute)
                              and isinstance(attribute.value, ast.Name) and attribute.value.id == "self"
                              and attribute.attr not in ("data_url", "endpoints", "source")})
        assert run_on_self == [], f"{name} reaches the run through self: {run_on_self}"
    text = README.read_text(encoding="utf-8")
    assert not re.search(r"`self\.(http|warn|resolved|settings|ledger|documents|known_\w+)\b", text)
