"""Every built-in source is written on the run context (issue #35 item 1): `fetch(self, ctx)`,
`parse(self, ctx, raw)` and, where it has detail pages, `fetch_detail(self, ctx, recall)`. The
first API (`fetch(self)`, everything on `self`) stays for third-party sources only, through the
adapter in `BaseCrawler`; no module under `sources/` uses it."""
from basecrawler import BaseCrawler
from basecrawler.pipeline.registry import discover


def _first_api_methods(cls: type) -> list[str]:
    """The source methods of `cls` that BaseCrawler would call the first API's way."""
    methods = ["fetch", "parse"] + (["fetch_detail"] if cls.has_detail_phase() else [])
    return [name for name in methods if not cls.takes_context(name)]


def test_every_built_in_source_takes_the_run_context():
    sources = discover()
    assert {"au", "ca", "eu", "jp", "us"} <= set(sources)   # discovery found the built-in ones
    on_first_api = {source_id: _first_api_methods(cls) for source_id, cls in sources.items()
                    if cls.__module__.startswith("sources.") and _first_api_methods(cls)}
    assert on_first_api == {}, "write these on the run context: fetch(self, ctx), parse(self, ctx, raw)"


def test_the_check_sees_a_source_of_the_first_api():
    # The marker the test above reads: a first-API source is told apart by arity.
    class FirstApi(BaseCrawler):
        source, country = "firstapi_check", "XX"

        def fetch(self):
            return []

        def parse(self, raw):
            return None

        def fetch_detail(self, recall):
            return None

    assert _first_api_methods(FirstApi) == ["fetch", "parse", "fetch_detail"]
