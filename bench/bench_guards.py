"""Benchmark of the translation guards: false blocks on faithful Korean, catches per corruption.

The corpus (`fixtures/translate/guard_corpus.jsonl`, see its README) holds Japanese and English
recall texts (component, defect and cause, remedy) with a faithful Korean each. Every faithful
Korean goes through the guards as the worker judges a backend's answer (codes masked first,
the output normalised); a block there is a false block. Each corruption below is made from
the faithful Korean of every text it applies to (a code changed needs a code, a dropped
sentence needs two sentences) and should be blocked. Run on demand (not part of the tests):

    python bench/bench_guards.py [--corpus PATH] [--show-misses] [--disable _letter_floor]
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import unicodedata
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from translate import guards  # noqa: E402
from translate.guards import check, echo_in_descriptive_field, numbers  # noqa: E402
from translate.memory import normalize_text  # noqa: E402
from translate.protect import code_spans, mask  # noqa: E402

CORPUS = ROOT / "fixtures" / "translate" / "guard_corpus.jsonl"

# Look-alike substitutes a model produces for letter-only codes.
SWAPS = {"ECU": "ECM", "ECM": "ECU", "EV": "HV", "IC": "LSI", "ABS": "ESC", "SRS": "SRB", "VIN": "VIM",
         "TPMS": "TPWS", "LED": "HID", "EPS": "EHPS", "TCM": "PCM", "AEB": "ACC", "ICCU": "OBC", "DC-DC": "AC-DC"}


# Corpus field → the worker's field name (a defect-and-cause text is stored as the summary).
FIELDS = {"component": "component", "cause": "summary", "summary": "summary", "remedy": "remedy"}


def judge(row: dict, output: str) -> str | None:
    """The guards' verdict on `output`, as the worker asks for it: the backend's answer is judged
    against the masked source, then the stored text is checked for a field-level echo."""
    source, lang = row["source"], row["lang"]
    masked = mask(source, None, lang)
    output = normalize_text(output)
    return (check(source, output, lang, protected=masked.slots, exempt=masked.replaced)
            or echo_in_descriptive_field(FIELDS[row["field"]], normalize_text(source), output))


def _wide(text: str) -> str:
    """ASCII letters, digits and '-' in their full-width forms."""
    return "".join(chr(ord(ch) + 0xFEE0) if ch.isascii() and (ch.isalnum() or ch == "-") else ch for ch in text)


def _codes_of(korean: str, *, letters_only=False, full_width=False):
    for start, end in code_spans(korean):
        code = korean[start:end]
        plain = unicodedata.normalize("NFKC", code)
        if letters_only and any(ch.isdigit() for ch in plain):
            continue
        if full_width and code == plain:
            continue
        yield start, end, code, plain


def _ascii_codes(korean: str) -> str:
    for start, end in reversed(code_spans(korean)):
        korean = korean[:start] + unicodedata.normalize("NFKC", korean[start:end]) + korean[end:]
    return korean


def letter_code_changed(row):
    for start, end, code, plain in _codes_of(row["korean"], letters_only=True):
        swap = SWAPS.get(plain, plain[:-1] + chr((ord(plain[-1]) - 64) % 26 + 65))
        swap = _wide(swap) if code != plain else swap
        return row["korean"][:start] + swap + row["korean"][end:]
    return None


def full_width_code_changed(row):
    """The issue's ４Ｖ２０ → 4B20: normalised to ASCII and one letter changed (a digit if none)."""
    for start, end, code, plain in _codes_of(row["korean"], full_width=True):
        index = next((i for i, ch in enumerate(plain) if ch.isalpha()), None)
        if index is None:
            index = next(i for i, ch in enumerate(plain) if ch.isdigit())
            new = str((int(plain[index]) + 1) % 10)
        else:
            new = "B" if plain[index] != "B" else "V"
        return row["korean"][:start] + plain[:index] + new + plain[index + 1:] + row["korean"][end:]
    return None


def korean_sentences(korean: str) -> list[str]:
    """A plain split after a full stop and a space (independent of the guards' own splitter)."""
    return [s for s in re.split(r"(?<=[.。])\s+", korean.strip()) if s]


def only_first_sentence(row):
    parts = korean_sentences(row["korean"])
    return parts[0] if len(parts) >= 2 else None


_NUMBER = re.compile(r"[0-9０-９]+(?:[,，.][0-9０-９]+)*")


def _source_number(row):
    """The first number of the Korean that the source has too ("second-row" → "2열" is not)."""
    wanted = numbers(row["source"])
    return next((m for m in _NUMBER.finditer(row["korean"]) if numbers(m.group(0)).keys() <= wanted.keys()), None)


def number_dropped(row):
    match = _source_number(row)
    return row["korean"][:match.start()] + row["korean"][match.end():] if match else None


def digit_changed(row):
    match = _source_number(row)
    if not match:
        return None
    last = match.end() - 1
    digit = unicodedata.normalize("NFKC", row["korean"][last])
    return row["korean"][:last] + str((int(digit) + 1) % 10) + row["korean"][last + 1:]


def looping_tail(row):
    words = row["korean"].rstrip(".。 ").split()
    tail = " ".join(words[-2:])
    return row["korean"].rstrip(".。 ") + (" " + tail) * 6


def english_answer(row, corpus):
    """An English recall text in place of the Korean (another text's English source)."""
    english = [r["source"] for r in corpus if r["lang"] == "en" and r["id"] != row["id"]]
    return english[corpus.index(row) % len(english)]


CORRUPTIONS = {
    "letter-only code changed": letter_code_changed,
    "full-width code changed": full_width_code_changed,
    "whole translation twice": lambda row: row["korean"] + " " + row["korean"],
    "whole translation three times": lambda row: " ".join([row["korean"]] * 3),
    "cut to first 20 %": lambda row: row["korean"][:max(1, round(len(row["korean"]) * 0.2))],
    "only the first of several sentences": only_first_sentence,
    "echo of the source": lambda row: row["source"],
    "English answer": None,   # needs the corpus, see main()
    "number dropped": number_dropped,
    "digit changed": digit_changed,
    "looping tail": looping_tail,
}


def _by(reasons) -> str:
    """"code missing 40, too short 2": the guards that blocked, by the start of their reason."""
    counts = Counter(re.sub(r"\s+of$", "", re.match(r"[a-zA-Z ]*", reason).group(0).strip()) for reason in reasons)
    return ", ".join(f"{name} {n}" for name, n in counts.most_common()) or "—"


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--show-misses", action="store_true", help="print every false block and every miss")
    parser.add_argument("--disable", action="append", default=[], metavar="GUARD",
                        help="switch a guard off (e.g. _codes_kept, _not_repeated, _letter_floor, _sentences_kept) "
                             "to see what it alone catches")
    args = parser.parse_args(argv)
    for name in args.disable:
        if not callable(getattr(guards, name, None)):
            parser.error(f"no guard named {name}")
        setattr(guards, name, lambda *a, **k: None)
    corpus = load(args.corpus)
    langs = sorted({r["lang"] for r in corpus})
    print(f"corpus: {len(corpus)} texts (" + ", ".join(f"{sum(r['lang'] == l for r in corpus)} {l}" for l in langs) + ")")

    false_blocks = [(r, reason) for r in corpus if (reason := judge(r, r["korean"]))]
    print("\n| case | texts | blocked | rate | blocked by (first guard to object) |\n|---|---|---|---|---|")
    print(f"| faithful Korean (false blocks) | {len(corpus)} | {len(false_blocks)} | "
          f"{len(false_blocks) / len(corpus):.1%} | {_by(reason for _, reason in false_blocks)} |")
    # The same faithful Korean with its codes in ASCII (a backend or an older memory entry that
    # normalised the width): the guards compare codes in NFKC form, so these must pass too.
    ascii_rows = [r for r in corpus if any(code != unicodedata.normalize("NFKC", code)
                                           for *_, code, _ in _codes_of(r["korean"]))]
    ascii_blocks = [(r, reason) for r in ascii_rows if (reason := judge(r, _ascii_codes(r["korean"])))]
    false_blocks += ascii_blocks
    print(f"| faithful Korean, full-width codes written in ASCII | {len(ascii_rows)} | {len(ascii_blocks)} | "
          f"{len(ascii_blocks) / max(1, len(ascii_rows)):.1%} | {_by(reason for _, reason in ascii_blocks)} |")
    misses, worst = [], 1.0
    for kind, make in CORRUPTIONS.items():
        tried, reasons = 0, []
        for row in corpus:
            bad = english_answer(row, corpus) if make is None else make(row)
            if bad is None or normalize_text(bad) == normalize_text(row["korean"]):
                continue
            tried += 1
            reason = judge(row, bad)
            if reason:
                reasons.append(reason)
            else:
                misses.append((kind, row, bad))
        rate = len(reasons) / tried if tried else float("nan")
        worst = min(worst, rate)
        print(f"| {kind} | {tried} | {len(reasons)} | {rate:.1%} | {_by(reasons)} |")
    false_rate = len(false_blocks) / (len(corpus) + len(ascii_rows))
    met = false_rate <= 0.02 and worst >= 0.95
    print(f"\ntargets (false blocks <= 2 %, every kind caught >= 95 %): {'met' if met else 'NOT met'}")
    if args.show_misses:
        for row, reason in false_blocks:
            print(f"false block {row['id']}: {reason}\n  {row['source']}\n  {row['korean']}")
        for kind, row, bad in misses:
            print(f"missed {kind} {row['id']}:\n  {row['source']}\n  {bad}")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
