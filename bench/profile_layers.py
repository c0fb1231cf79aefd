"""Split a cProfile of a crawl into layers: the source's parsing, the framework's per-record
work (make / validate / prepare), the store, the download, the rest. Used by the source
benchmarks (`--layers`), so the numbers in bench/README.md can be reproduced.

Each function's own time (tottime) goes to the layer of the file it is defined in; a C
function (`sqlite3 execute`, `_csv.reader`, a `str` method) has no file, so its time goes to
the layer of whichever Python function called it, per caller.
"""
from __future__ import annotations

import pstats
from pathlib import Path

REPO = str(Path(__file__).resolve().parents[1]) + "/"

# First match wins: (layer, substrings of a function's file path).
# Paths inside the repository are matched from its root ("/sources/…"), whatever the checkout's name.
LAYERS = (
    ("source parse", ("/sources/", "/basecrawler/formats/", "/ijson/", "/ftfy/", "/lxml/")),
    ("store", ("/basecrawler/store/", "/basecrawler/recordtypes/upsert.py", "/basecrawler/recordtypes/tables.py",
               "/sqlite_utils/", "/sqlite3/")),
    ("framework per record (make / validate / prepare)",
     ("/basecrawler/pipeline/records.py", "/basecrawler/recordtypes/", "/record_types/", "/pydantic",
      "/basecrawler/model.py")),
    ("download (HTTP, archive, temp file)", ("/basecrawler/fetch/", "/httpx/", "/httpcore/", "/h11/")),
    ("pipeline (run loop, ledger, dead letters)", ("/basecrawler/pipeline/",)),
)
OTHER = "other (imports, start-up, logging)"


def layer_of(filename: str) -> str | None:
    if filename == "~" or filename.startswith("<"):
        return None        # a C function (or frozen importlib): attributed to its caller
    if "/lib/python3" in filename and "/site-packages/" not in filename and "/importlib/" in filename:
        return OTHER
    if filename.startswith(REPO):
        filename = "/" + filename[len(REPO):]
    for layer, parts in LAYERS:
        if any(part in filename for part in parts):
            return layer
    if "/lib/python3" in filename and "/site-packages/" not in filename:
        return None        # a standard-library helper (re, functools, logging …): its caller's layer
    return OTHER


def split(stats: pstats.Stats) -> dict[str, float]:
    """Seconds of own time per layer (C functions charged to their Python callers)."""
    totals: dict[str, float] = {}
    raw = stats.stats  # type: ignore[attr-defined]
    for (filename, _line, _name), (_cc, _nc, tottime, _ct, callers) in raw.items():
        layer = layer_of(filename)
        if layer is not None:
            totals[layer] = totals.get(layer, 0.0) + tottime
            continue
        charged = 0.0
        for (caller_file, _l, _n), caller_stats in callers.items():
            caller_layer = _caller_layer(raw, caller_file, _l, _n)
            totals[caller_layer] = totals.get(caller_layer, 0.0) + caller_stats[2]
            charged += caller_stats[2]
        if tottime > charged:   # no caller recorded (the profiler's own entry)
            totals[OTHER] = totals.get(OTHER, 0.0) + tottime - charged
    return totals


def _caller_layer(raw: dict, filename: str, line: int, name: str, depth: int = 0) -> str:
    layer = layer_of(filename)
    if layer is not None or depth > 5:
        return layer or OTHER
    # A C function called by a C function (e.g. map(str.strip, …)): look one caller further up.
    callers = raw.get((filename, line, name), (0, 0, 0, 0, {}))[4]
    if not callers:
        return OTHER
    top = max(callers.items(), key=lambda item: item[1][2])[0]
    return _caller_layer(raw, *top, depth=depth + 1)


def report(stats: pstats.Stats, top: int = 8) -> str:
    """A table of the layers (seconds under the profiler, share) and each layer's costliest
    functions by own time."""
    totals = split(stats)
    whole = sum(totals.values()) or 1.0
    lines = ["| layer | s (under cProfile) | share |", "|---|---|---|"]
    for layer, seconds in sorted(totals.items(), key=lambda item: -item[1]):
        lines.append(f"| {layer} | {seconds:.2f} | {seconds / whole:.0%} |")
    lines.append("")
    by_layer: dict[str, list[tuple[float, str]]] = {}
    raw = stats.stats  # type: ignore[attr-defined]
    for (filename, line, name), (_cc, nc, tottime, cumtime, callers) in raw.items():
        layer = layer_of(filename)
        label = f"{_short(filename)}:{line}({name})" if layer else f"{{{name}}}"
        if layer is None:
            layer = _caller_layer(raw, *max(callers.items(), key=lambda item: item[1][2])[0]) if callers else OTHER
        by_layer.setdefault(layer, []).append((tottime, f"{label} — {nc} calls, own {tottime:.2f} s, "
                                                        f"cumulative {cumtime:.2f} s"))
    for layer, _seconds in sorted(totals.items(), key=lambda item: -item[1]):
        lines.append(f"{layer}:")
        for _t, text in sorted(by_layer.get(layer, []), reverse=True)[:top]:
            lines.append(f"  {text}")
    return "\n".join(lines)


def _short(filename: str) -> str:
    if filename.startswith(REPO):
        return filename[len(REPO):]
    for marker in ("/site-packages/", "/lib/python3.11/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename
