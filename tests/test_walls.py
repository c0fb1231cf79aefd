"""The walls of docs/ARCHITECTURE.md, kept by a test: a source reaches only what is on `self`
(no store, archive or artifact manifest), and commands are thin calls into the library (no SQL)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SQL = re.compile(r"\b(SELECT\s.+\sFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM)\b", re.IGNORECASE)


def _python_files(folder: str) -> list[Path]:
    files = sorted((ROOT / folder).glob("*.py"))
    assert files, f"no modules found under {folder}/"
    return files


def test_sources_touch_neither_the_store_nor_the_archive_nor_the_manifest():
    reaching = [f"{path.name}:{number}: {line.strip()}"
                for path in _python_files("sources")
                for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                if re.search(r"self\.store|Archive\(|Artifacts\(", line)]
    assert reaching == []


def test_commands_hold_no_sql():
    with_sql = [f"{path.name}:{number}: {line.strip()}"
                for path in _python_files("basecrawler/commands")
                for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                if SQL.search(line)]
    assert with_sql == []


def test_the_pipeline_spine_stays_readable_in_one_sitting():
    lines = (ROOT / "basecrawler" / "crawler.py").read_text(encoding="utf-8").count("\n")
    assert lines <= 250, f"crawler.py has {lines} lines; move what is not the pipeline into its own module"
