"""OCR benchmark: seconds per page and table-cell accuracy of basecrawler.formats.pdf on the generated
image-only MLIT fixtures, against the tables of their text-layer originals.

    python bench/bench_ocr.py [--dpi 300 [400 ...]] [--repeat N]

A cell counts as exact when it equals the original after NFKC and with whitespace removed.
Prints one table; run on demand (needs tesseract-ocr and tesseract-ocr-jpn).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
import unicodedata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from basecrawler.formats.pdf import read_pdf  # noqa: E402

FIXTURES = REPO / "fixtures" / "jp"
PAIRS = [("list_ducati_single.pdf", "list_ducati_single_scanned.pdf"),
         ("list_small_batch.pdf", "list_small_batch_scanned.pdf")]


def squash(text: str) -> str:
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text or ""))


def compare(truth_pages, ocr_pages) -> tuple[int, int]:
    exact = total = 0
    for true_page, ocr_page in zip(truth_pages, ocr_pages):
        for t, true_table in enumerate(true_page.tables):
            ocr_table = ocr_page.tables[t] if t < len(ocr_page.tables) else []
            for r, true_row in enumerate(true_table):
                ocr_row = ocr_table[r] if r < len(ocr_table) else []
                for c, true_cell in enumerate(true_row):
                    total += 1
                    exact += c < len(ocr_row) and squash(ocr_row[c]) == squash(true_cell)
    return exact, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dpi", type=int, nargs="+", default=[300])
    parser.add_argument("--repeat", type=int, default=1, help="runs per file (the fastest counts)")
    args = parser.parse_args()
    os.environ["OMP_THREAD_LIMIT"] = "1"
    print(f"{'file':<34} {'dpi':>4} {'pages':>5} {'s/page':>7} {'cells exact':>12} {'accuracy':>9}")
    grand_exact = grand_total = 0
    for dpi in args.dpi:
        for original, scanned in PAIRS:
            truth = read_pdf((FIXTURES / original).read_bytes())
            body = (FIXTURES / scanned).read_bytes()
            best = None
            for _ in range(args.repeat):
                started = time.perf_counter()
                pages = read_pdf(body, dpi=dpi)
                elapsed = time.perf_counter() - started
                best = elapsed if best is None else min(best, elapsed)
            exact, total = compare(truth, pages)
            grand_exact += exact
            grand_total += total
            print(f"{scanned:<34} {dpi:>4} {len(pages):>5} {best / len(pages):>7.2f} {f'{exact}/{total}':>12} "
                  f"{exact / total:>9.1%}")
    print(f"{'all':<34} {'':>4} {'':>5} {'':>7} {f'{grand_exact}/{grand_total}':>12} {grand_exact / grand_total:>9.1%}")


if __name__ == "__main__":
    main()
