"""Regenerate the web view's screenshots in this folder (README, "What it looks like").

    .venv/bin/python docs/screenshots/make.py            # writes docs/screenshots/*.png
    .venv/bin/python docs/screenshots/make.py --out DIR  # somewhere else

What it shows is what a fresh clone's `scripts/run --replay` gives: every source from
fixtures/replay into a new store (in a temporary folder), translated by the fake LibreTranslate
(translate/fakeserver.py: its "Korean" is deterministic pseudo-Korean, not Korean), served by
`basecrawler browse` and photographed in headless Chromium (tests/headless.py): per record type
its table, a search and a card, in Korean and in English, 1400 px and 390 px wide. Each PNG is
reduced to a 64-colour palette (Pillow) to keep the folder small. Needs chromium and the web
extra; no network.
"""
from __future__ import annotations

import argparse
import io
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
# The commands and the web view it starts run this checkout's code, whatever is installed.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))

import headless  # noqa: E402  (tests/headless.py: Chromium over the DevTools pipe)
from basecrawler.reading.browse import BrowseServer  # noqa: E402
from translate.fakeserver import FakeLibreTranslate  # noqa: E402

WIDTHS = {1400: 1300, 390: 844}   # viewport width: height (1300: the facets and the first rows)
# On a phone the facets fill the first screens: its table and search pictures start at the rows.
TO_ROWS = "document.querySelector('.table-wrapper, .zero-results')?.scrollIntoView(); window.scrollBy(0, -8)"
LANGS = ("ko", "en")
# Per record type: its table, a search that finds some of it, and the card of one record (the
# SQL picks it, so the pictures do not depend on row ids).
PAGES = {
    "vehicle_recall": ("recalls", "brake", "SELECT min(id) FROM recalls WHERE source = 'jp'"),
    "product_alert": ("product_alerts", "Listeria", "SELECT min(id) FROM product_alerts WHERE title_original LIKE '%Listeria%'"),
    "package_release": ("package_releases", "PDF", "SELECT max(id) FROM package_releases"),
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def build_store(folder: Path) -> Path:
    """The replay store, translated by the fake backend, as `scripts/run --replay` with it makes."""
    db = folder / "replay.db"
    command = [sys.executable, "-m", "basecrawler", "--db", str(db), "-q"]
    subprocess.run([*command, "run", "--all", "--mode", "full", "--replay", str(ROOT / "fixtures" / "replay")],
                   cwd=folder, check=True, stderr=subprocess.DEVNULL)
    with FakeLibreTranslate() as fake:
        environ = {**os.environ, "BASECRAWLER_TRANSLATE_BACKEND": "libretranslate",
                   "BASECRAWLER_LIBRETRANSLATE_URL": fake.url}
        subprocess.run([*command, "translate"], cwd=folder, env=environ, check=True, stdout=subprocess.DEVNULL)
    return db


def small_png(png: bytes, colours: int = 64) -> bytes:
    """The screenshot on a palette of `colours`: text stays sharp, the file a third the size."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    out = io.BytesIO()
    image.quantize(colors=colours, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
        out, format="PNG", optimize=True)
    return out.getvalue()


def shots(db: Path) -> list[tuple[str, str]]:
    """(file name, path) of every picture."""
    name = db.stem
    with sqlite3.connect(db) as conn:
        cards = {kind: conn.execute(sql).fetchone()[0] for kind, (_t, _s, sql) in PAGES.items()}
    out = []
    for kind, (table, term, _sql) in PAGES.items():
        for lang in LANGS:
            for width in WIDTHS:
                out += [(f"{kind}-table-{lang}-{width}.png", f"/{name}/{table}?_lang={lang}"),
                        (f"{kind}-search-{lang}-{width}.png", f"/{name}/{table}?_search={term}&_lang={lang}"),
                        (f"{kind}-card-{lang}-{width}.png", f"/{name}/{table}/{cards[kind]}?_lang={lang}")]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder for the PNG files (default: this one)")
    args = parser.parse_args(argv)
    if headless.CHROMIUM is None:
        print("make.py: no chromium on PATH (apt-get install chromium)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="basecrawler-screenshots-") as folder:
        db = build_store(Path(folder))
        port = _free_port()
        with BrowseServer(db, port=port) as server, headless.Browser(Path(folder) / "profile") as browser:
            total = 0
            for file_name, path in shots(db):
                width = int(file_name.rsplit("-", 1)[1].removesuffix(".png"))
                height = WIDTHS[width] if width < 600 or "-card-" not in file_name else 1000
                browser.open(server.url + path, width=width, height=height)
                if width < 600 and "-card-" not in file_name:
                    browser.evaluate(TO_ROWS)
                png = small_png(browser.screenshot())
                (args.out / file_name).write_bytes(png)
                total += len(png)
            print(f"{len(shots(db))} screenshots, {total / 1024:.0f} KB, in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
