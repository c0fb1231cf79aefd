"""`basecrawler run` imports what a crawl needs and nothing of the other commands (issue #23: a
whole hc run ≤ 5 s, of which start-up was ~1 s): no web view, exporters, scheduler, translation
worker or table renderer, and none of the heavy libraries behind them."""
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# What a `run` must not import: other commands' modules and the libraries behind them. (The
# store still opens psycopg's error classes and the translation package's schema on SQLite too:
# not the command line's doing, so not checked here.)
NOT_FOR_A_RUN = ("datasette", "openpyxl", "pdfplumber", "pytesseract", "apscheduler", "webbrowser",
                 "translate.command", "basecrawler.formats.pdf", "basecrawler.reading.browse", "basecrawler.reading.export",
                 "basecrawler.reading.tables", "basecrawler.operations.scheduler", "basecrawler.commands.browse",
                 "basecrawler.commands.export", "basecrawler.commands.schedule", "basecrawler.commands.doctor",
                 "basecrawler.commands.search", "basecrawler.commands.status",
                 # a SQLite run needs neither the PostgreSQL driver nor the translation worker
                 "psycopg", "translate.worker", "translate.backends")

CHILD = """
import json, sys
from basecrawler.cli import main
code = main(sys.argv[1:])
print(json.dumps({"exit": code, "modules": sorted(sys.modules)}))
"""


def run_in_a_fresh_process(tmp_path, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BASECRAWLER_")}
    done = subprocess.run([sys.executable, "-c", CHILD, "--db", str(tmp_path / "run.db"), "-q", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def loaded(modules: list[str], names) -> list[str]:
    return [m for m in modules if any(m == name or m.startswith(name + ".") for name in names)]


def test_a_run_imports_none_of_the_other_commands_or_their_libraries(tmp_path):
    child = run_in_a_fresh_process(tmp_path, "run", "--source", "hc", "--mode", "full",
                                   "--replay", str(REPO / "fixtures" / "replay"))
    assert child["exit"] == 0
    assert "sources.hc" in child["modules"]            # it did crawl
    assert loaded(child["modules"], NOT_FOR_A_RUN) == []


def test_the_whole_command_line_still_answers_a_command_that_is_not_a_module(tmp_path, capsys):
    # `list` lives in commands/run.py, `translate` in an installed package: both still work.
    from basecrawler.cli import build_parser

    assert build_parser(["list"]).parse_args(["list"]).command == "list"
    assert build_parser(["--db", "x.db", "translate", "--limit", "3"]).parse_args(
        ["--db", "x.db", "translate", "--limit", "3"]).command == "translate"
    assert build_parser(["-q", "run", "--all"]).parse_args(["-q", "run", "--all"]).all is True
