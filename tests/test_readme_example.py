"""The README's "Adding a source" example is real code: it runs as written."""
import re
import types
from pathlib import Path

import httpx

from basecrawler.testing import fast_settings

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_source_example_runs_end_to_end(tmp_path, store):
    code = re.search(r"A complete example, `sources/xx.py`:\n\n```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    module = types.ModuleType("readme_example")
    exec(code.group(1), module.__dict__)
    pages = {0: [{"id": "X1", "published": "5 March 2024", "make": "Acme", "model": "Z", "description": "Brake hose",
                  "remedy": "Replace", "units": "2,700.00", "url": "https://www.example.gov/r/X1", "category": "car"}],
             1: []}
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=pages[int(request.url.params["page"])]))
    result = module.ExampleCrawler(store, settings=fast_settings(store.path), transport=transport, mode="full").run()
    assert result.status == "succeeded" and result.counts.new == 1
    row = store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "X1"})
    assert (row["recall_date"], row["affected_units"], row["extra"]) == ("2024-03-05", 2700, {"category": "car"})
