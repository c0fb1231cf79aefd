"""One runner (issue 15.4): `run` and the scheduler share `runner.run_sources`; translation
joins the daily job (and the command line) through entry points, so no module of basecrawler/
imports translate/."""
import ast
import threading
import time
from pathlib import Path

from basecrawler import BaseCrawler
from basecrawler.pipeline.runner import job_hooks, register_job_hook, run_sources
from basecrawler.operations.scheduler import run_scheduled_job

PACKAGE = Path(__file__).resolve().parents[1] / "basecrawler"


def _source(source_id, journal, *, fails=False, stop_at=None):
    class Demo(BaseCrawler):
        source = source_id
        country = source_id.upper()[:2]

        def fetch(self):
            journal.append(source_id)
            if fails:
                raise RuntimeError("listing unreachable")
            for n in range(3):
                yield {"id": f"{source_id}-{n}"}

        def parse(self, raw):
            if raw["id"] == stop_at:  # SIGTERM arrives while this item is handled
                self._stop.set()
            return {"recall_number": raw["id"], "recall_date": "2024-05-01"}

    return Demo


def test_one_failing_source_does_not_stop_the_others(settings):
    journal = []
    summary = run_sources({"aa": _source("aa", journal, fails=True), "bb": _source("bb", journal)}, settings=settings)
    assert journal == ["aa", "bb"]
    assert summary.statuses() == {"aa": "failed", "bb": "succeeded"} and not summary.ok
    assert summary.summary_line() == "2 sources: 1 succeeded, 1 failed or suspect (aa=failed, bb=succeeded)"


def test_a_stop_keeps_what_was_stored_and_starts_no_later_source(settings, store):
    journal, stop = [], threading.Event()
    slow = _source("aa", journal, stop_at="aa-1")
    summary = run_sources({"aa": slow, "bb": _source("bb", journal)}, settings=settings, stop=stop, store=store)
    assert journal == ["aa"] and summary.not_started == ["bb"] and summary.stopped
    assert summary.statuses() == {"aa": "interrupted", "bb": "not_started"}
    assert summary.summary_line() == "2 sources: 0 succeeded, 0 failed or suspect, 1 interrupted, 1 not started " \
                                     "(aa=interrupted, bb=not_started)"
    assert store.lookup.count("vehicle_recall", "aa") == 2                 # the two items before the stop
    assert store.runs.last_run("aa")["status"] == "interrupted"


def test_the_scheduled_job_uses_the_runner_and_then_the_hooks(settings, monkeypatch):
    calls = []
    monkeypatch.setattr("basecrawler.operations.schedulejob.job_hooks", lambda: {"note": lambda store, **kw: calls.append("hook") or "noted"})
    report = run_scheduled_job(settings, crawlers={"aa": _source("aa", calls)})
    assert calls == ["aa", "hook"] and report.translation == "noted"
    assert report.summary.statuses() == {"aa": "succeeded"}


def test_translation_is_a_job_hook_registered_by_its_package():
    from translate.jobhook import translate_after_job

    assert job_hooks()["translate"] is translate_after_job


def test_a_registered_hook_is_listed(monkeypatch):
    monkeypatch.setattr("basecrawler.pipeline.runner._job_hooks", {})
    register_job_hook("mine", print)
    assert job_hooks()["mine"] is print


def test_the_translate_command_comes_from_the_translate_package():
    from basecrawler.cli import build_parser
    from translate.command import cmd_translate

    args = build_parser().parse_args(["translate", "--limit", "3"])
    assert args.func is cmd_translate and args.limit == 3


def test_no_module_of_basecrawler_imports_translate():
    importers = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            if any(name == "translate" or name.startswith("translate.") for name in names):
                importers.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert importers == []


def test_the_framework_holds_no_ddl_of_the_translation_memory():
    """Its schema belongs to translate/ (translate/schema.py, a `basecrawler.schema` extension)."""
    import re
    ddl = re.compile(r"""CREATE\s+TABLE[^;]*translation_memory|\[["']translation_memory["']\]\.create""", re.I)
    found = [f"{path.relative_to(PACKAGE.parent)}" for path in PACKAGE.rglob("*.py") if ddl.search(path.read_text())]
    assert found == []


def test_a_stop_during_a_wait_is_never_a_dead_letter(settings, store):
    class Careful(BaseCrawler):
        """Catches every exception around its own waits and keeps the item as a dead letter."""
        source = "cc"
        country = "CC"

        def fetch(self):
            for n in range(3):
                try:
                    if n == 1:
                        self._stop.set()           # SIGTERM arrives during the back-off wait …
                        self._sleep(30)            # … which ends at once
                    yield {"id": f"cc-{n}"}
                except Exception as exc:
                    self.dead_letter({"n": n}, exc)

        def parse(self, raw):
            return {"recall_number": raw["id"], "recall_date": "2024-05-01"}

    started = time.monotonic()
    summary = run_sources({"cc": Careful}, settings=settings, stop=threading.Event(), store=store)
    assert time.monotonic() - started < 5
    assert summary.statuses() == {"cc": "interrupted"}
    assert store.lookup.count("vehicle_recall", "cc") == 1
    assert store.query("SELECT COUNT(*) AS n FROM dead_letters")[0]["n"] == 0


def test_runs_that_stored_records_leave_the_web_views_facet_counts_ready(settings, store):
    from basecrawler.reading.facetcounts import count_whole_table, data_marker, stored_counts
    from basecrawler.recordtypes import get_record_type

    run_sources({"aa": _source("aa", []), "bb": _source("bb", [])}, settings=settings, store=store)
    conn = store.db.conn
    kept = stored_counts(conn, "recalls", data_marker(conn, "recalls"))
    assert kept is not None and kept == count_whole_table(conn, get_record_type("vehicle_recall"))["rows"]
    assert any({"AA", "BB"} <= {value for row in rows for value in row.values()} for rows in kept.values())


def test_a_run_that_changed_nothing_counts_nothing_again(settings, store, monkeypatch):
    import basecrawler.pipeline.runner as runner

    run_sources({"aa": _source("aa", [])}, settings=settings, store=store)
    counted = []
    monkeypatch.setattr(runner, "keep_facet_counts", counted.append)
    run_sources({"aa": _source("aa", [])}, settings=settings, store=store)   # the same three records
    assert counted == []
