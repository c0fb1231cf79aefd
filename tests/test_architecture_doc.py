"""docs/ARCHITECTURE.md stays a floor plan a newcomer reads in one sitting (#35 item 7): at
most ~250 lines, measurements left to bench/README.md, and every module it names exists."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")


def test_it_stays_short_and_leaves_numbers_of_speed_to_the_bench_readme():
    assert DOC.count("\n") <= 255
    assert not re.search(r"\d\s*(µs|ms)\b", DOC), "timings belong in bench/README.md"


def test_every_module_path_it_names_exists():
    named = set(re.findall(r"`((?:basecrawler/|sources/|record_types/|translate/|tests/|store/|pipeline/|reading/"
                           r"|fetch/|formats/|recordtypes/|operations/|engines/|watch/)[\w/]*\.py)`", DOC))
    missing = []
    for path in named:
        candidates = [ROOT / path, ROOT / "basecrawler" / path, ROOT / "basecrawler" / "store" / path]
        if not any(c.exists() for c in candidates):
            missing.append(path)
    assert named and missing == []
