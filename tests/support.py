"""Scaffolding several test files share: a demo source fed from a list, a fake clock, an
encrypted PDF, a PDF of N pages, and a count of the rows a piece of code really writes.
Imported as `support` (pytest puts tests/ on sys.path, as for quirks_support and conftest)."""
from __future__ import annotations

import io
from contextlib import contextmanager

from basecrawler import BaseCrawler


class ItemsCrawler(BaseCrawler):
    """A demo source whose fetch() yields the `items=` it was built with; subclasses set the
    class attributes (source, country, endpoints) and parse()."""

    source = "items"
    country = "XX"
    source_lang = "en"
    endpoints = {"site": "https://demo.example"}

    def __init__(self, *args, items=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.items = list(items)

    def fetch(self):
        yield from self.items


class JsonFeedCrawler(BaseCrawler):
    """A demo source whose fetch() yields the items of one JSON list at `feed_path` on its
    "api" endpoint (point BASECRAWLER_<SOURCE>_API_URL at a loopback server); subclasses set
    `source`, `feed_path` and parse()."""

    source = "jsonfeed"
    country = "XX"
    endpoints = {"api": "https://api.example"}
    feed_path = "/feed.json"

    def fetch(self):
        yield from self.http.get_json(self.url("api", self.feed_path))


class FakeClock:
    """Clock and sleep for code under test: time only moves when the test (or a sleep) moves
    it. Call it (or .time()) for the time; pass .sleep where the code sleeps."""

    def __init__(self, start: float = 1_700_000_000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.0)

    def advance(self, seconds: float) -> None:
        self.now += seconds


def encrypted_pdf() -> bytes:
    """A one-page PDF locked with a password (reportlab): no text can be read from it."""
    from reportlab.pdfgen import canvas
    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, encrypt="secret")
    pdf.drawString(72, 720, "locked")
    pdf.save()
    return buffer.getvalue()


def pdf_of_pages(pages: int) -> bytes:
    """A PDF of `pages` A4 pages, each with one line of text ("page N of M", reportlab): a
    small document whose only problem is its page count."""
    from reportlab.pdfgen import canvas
    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer)
    for number in range(1, pages + 1):
        pdf.drawString(72, 720, f"page {number} of {pages}")
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


class RowWrites:
    """Rows inserted, updated or deleted per table while the `with row_writes(store)` block
    ran, counted by temporary triggers on the store's connection (the one the pipeline writes
    through). `by_table` maps table -> number of row writes; tables never written are absent."""

    def __init__(self):
        self.by_table: dict[str, int] = {}

    def __getitem__(self, table: str) -> int:
        return self.by_table.get(table, 0)


@contextmanager
def row_writes(store):
    conn = store.db.conn
    tables = [name for (name,) in conn.execute(
        "SELECT name FROM main.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' AND name NOT LIKE '%_fts_%'")]
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS _row_writes (tbl TEXT)")
    conn.execute("DELETE FROM temp._row_writes")
    for table in tables:
        for op in ("INSERT", "UPDATE", "DELETE"):
            conn.execute(f"CREATE TEMP TRIGGER IF NOT EXISTS _rw_{table}_{op.lower()} AFTER {op} ON main.{table} "
                         f"BEGIN INSERT INTO _row_writes VALUES ('{table}'); END")
    counted = RowWrites()
    try:
        yield counted
    finally:
        for tbl, n in conn.execute("SELECT tbl, COUNT(*) FROM temp._row_writes GROUP BY tbl"):
            counted.by_table[tbl] = n
        for table in tables:
            for op in ("insert", "update", "delete"):
                conn.execute(f"DROP TRIGGER IF EXISTS temp._rw_{table}_{op}")
        conn.execute("DROP TABLE temp._row_writes")


def assert_adds_up(run: dict) -> None:
    """The two equations of the run line (README, "The line adds up"), on a crawl_runs row."""
    import json

    assert run["parsed"] == (run["out_of_range"] + run["new"] + run["updated"] + run["unchanged"]
                             + run["merged"] + run["store_failed"]), run
    assert run["saved"] == run["new"] + run["updated"] + run["unchanged"], run
    # Each fetched item produced records, or is exactly one of skipped / unparseable.
    assert run["skipped"] + run["unparseable"] <= run["fetched"], run
    if run["parsed"] == 0:
        assert run["fetched"] == run["skipped"] + run["unparseable"], run
    assert sum(json.loads(run["skip_reasons"] or "{}").values()) == run["skipped"], run


# ---- a publisher's fixture API (fixtures/<source>/api.py) and the real samples ---------------
def real_sample(name: str):
    """Path of `../shared/real-samples/<name>` beside the checkout (or one level up, as in a
    worktree); a path that does not exist when neither has it (the test then skips)."""
    from pathlib import Path
    repo = Path(__file__).resolve().parents[1]
    folders = (repo.parent / "shared", repo.parents[1] / "shared")
    return next((p for p in folders if (p / "real-samples" / name).exists()), folders[0]) / "real-samples" / name


def fixture_api(source: str):
    """fixtures/<source>/api.py loaded as a module: the LoopbackServer-style handlers of that
    publisher's fake API (fixtures/ is not a package)."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "fixtures" / source / "api.py"
    spec = importlib.util.spec_from_file_location(f"{source}_fixture_api", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def handler_transport(handle, requested: list | None = None):
    """A LoopbackServer-style handler behind an httpx MockTransport; `requested` collects the URLs."""
    import httpx

    from basecrawler.testing import Request

    def handler(request: httpx.Request):
        if requested is not None:
            requested.append(request.url)
        reply = handle(Request("GET", request.url.raw_path.decode(), {}, 0.0))
        return httpx.Response(reply.status, headers=reply.headers or {}, content=reply.body)
    return httpx.MockTransport(handler)


def numbered_recall(n: int, **fields):
    """A US vehicle recall numbered R0000… with the fields the write-path tests compare."""
    from basecrawler import Recall

    values = {"country": "US", "recall_number": f"R{n:04d}", "recall_date": "2024-05-01", "source_lang": "en",
              "manufacturer_original": "Acme", "summary_original": f"Summary {n}"}
    values.update(fields)
    return Recall(**values)


def refuse_recall_number(store, number: str) -> None:
    """Make SQLite refuse to insert the recall numbered `number` (a row the store cannot write)."""
    store.write(lambda db: db.conn.execute(
        f"CREATE TRIGGER refuse_{number} BEFORE INSERT ON recalls WHEN new.recall_number = '{number}' "
        "BEGIN SELECT RAISE(ABORT, 'refused'); END"))
