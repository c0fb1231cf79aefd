"""`doctor`: is this machine ready to crawl? One line per check: ✓ holds, ✗ broken (with the
fix for that component), – not set up (a note, not a failure); `--json`.

Checks what a run needs and cannot fix itself: tesseract and its Japanese data (scanned MLIT
PDFs), the Japanese font, a writable database location with free disk, the archive's size,
the translation backend (when one is configured: one short text translated through the same
call `translate` makes), every source endpoint after its `BASECRAWLER_<SOURCE>_<ENDPOINT>_URL`
override (one short GET each, timed) and the scheduler. Read-only: it creates no database,
folder or lock file. Exit 0 when nothing is broken, 1 otherwise; a scheduler that is not
running is a note, unless `--expect-scheduler` says this machine should have one.
"""
from __future__ import annotations

import fcntl
import glob
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from basecrawler.config import DEFAULT_USER_AGENT, Settings, db_directory, endpoint_override
from basecrawler.errors import EXIT_OK, ConfigError, CrawlerError
from basecrawler.pipeline.runner import translation_backend_factory
from basecrawler.reading.tables import render_table
from basecrawler.store.engines import is_postgres_url

OCR_PACKAGES = "sudo apt-get install tesseract-ocr tesseract-ocr-jpn (scripts/setup does)"
# IPA Gothic, the font scripts/setup installs (the Japanese fixtures are drawn with it).
FONT_GLOBS = ("/usr/share/fonts/opentype/ipafont-gothic/ipag*.ttf", "/usr/share/fonts/truetype/fonts-japanese-gothic.ttf")
MIN_FREE_BYTES = 1 << 30
DEFAULT_TIMEOUT_S = 5.0
OFFLINE_HINT = "check the network or proxy; without network, fill the store from the replay set: scripts/run --replay"


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str | None = None
    seconds: float | None = None
    # Not set up, and nothing needs it to be (no scheduler on a machine run by hand): `ok` stays
    # True so the exit code is 0; the line starts with – and `fix` says how to set it up.
    note: bool = False

    @property
    def mark(self) -> str:
        return "–" if self.note else "✓" if self.ok else "✗"

    def result(self) -> str:
        """The detail, with the fix (or, for a note, how to set it up) after it."""
        if self.note and self.fix:
            return f"{self.detail} — to set up: {self.fix}"
        return self.detail if self.ok or not self.fix else f"{self.detail} — fix: {self.fix}"

    def line(self) -> str:
        return f"{self.mark} {self.name}: {self.result()}"


def register(sub) -> None:
    parser = sub.add_parser("doctor", help="check tesseract, disk, backend, source endpoints and scheduler",
                            description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"seconds per network check (default {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--expect-scheduler", action="store_true",
                        help="a scheduler should run on this machine: fail (exit 1) when none is running")
    parser.set_defaults(func=cmd_doctor)


def cmd_doctor(args) -> int:
    checks = run_checks(args.settings, timeout_s=args.timeout, expect_scheduler=args.expect_scheduler)
    ok = all(c.ok for c in checks)
    if args.json:
        print(json.dumps({"ok": ok, "checks": [asdict(c) for c in checks]}, ensure_ascii=False, indent=2))
    else:   # one row per check; results line up whatever the script of the names and paths
        print(render_table(["", "check", "result"], [[c.mark, c.name, c.result()] for c in checks]))
    sys.stdout.flush()
    return EXIT_OK if ok else CrawlerError.exit_code   # a check failed


def run_checks(settings: Settings, *, timeout_s: float = DEFAULT_TIMEOUT_S, sources: dict | None = None,
               environ=os.environ, expect_scheduler: bool = False) -> list[Check]:
    if sources is None:
        from basecrawler.pipeline.registry import discover
        sources = discover()
    database = check_database(settings.db_path)
    checks = [*check_ocr(), check_font(), *database, check_archive(settings.db_path)]
    from basecrawler.pipeline.registry import configure_hint, unconfigured

    missing = {sid: unconfigured(cls) for sid, cls in sources.items()}
    probes = [(f"source {sid} {name}", base) for sid, cls in sorted(sources.items())
              for name, base in _endpoints(sid, cls) if name not in missing[sid]]
    # An endpoint the operator has not set is not probed: its placeholder host never answers.
    checks += [Check(f"source {sid} {', '.join(names)}", True, "not configured: skipped by run",
                     fix=configure_hint(sources[sid], names).removeprefix("not configured: "), note=True)
               for sid, names in sorted(missing.items()) if names]
    with ThreadPoolExecutor(max_workers=8) as pool:   # all hosts at once: the slowest sets the wait
        backend = pool.submit(check_translation_backend, environ)
        reached = list(pool.map(
            lambda probe: check_reachable(*probe, timeout_s=timeout_s, user_agent=settings.user_agent), probes))
        checks += [backend.result(), *collapse_offline(reached, settings.db_path)]
    checks.append(scheduler_check(settings.db_path, expected=expect_scheduler))
    if not all(c.ok for c in database):   # its own line says why; reading the store again only waits
        checks.append(Check("source coverage, watch channels", True, "skipped: the database cannot be read",
                            fix="fix the database first", note=True))
        return checks
    checks += coverage_checks(settings.db_path, sources)
    from basecrawler.watch.operators import doctor_checks   # each watch channel, nothing sent
    checks += [Check(name, ok, detail) for name, ok, detail in doctor_checks(settings.db_path)]
    return checks


def collapse_offline(reached: list[Check], db_path: str) -> list[Check]:
    """Every endpoint unreachable: one line saying this machine reaches no publisher and what
    to do (operations/offline.py), not one ✗ per endpoint. With records in the store it is a
    note (reading works; only crawling needs the network), else a failure."""
    from basecrawler.operations import offline

    if not offline.reaches_no_publisher(reached, OFFLINE_HINT):
        return reached
    records = offline.store_records(db_path)
    detail, seconds = offline.offline_detail(reached, records), max(c.seconds or 0 for c in reached)
    if records:
        return [Check("network", True, f"{detail} — to crawl: {OFFLINE_HINT}", None, seconds, note=True)]
    return [Check("network", False, detail, OFFLINE_HINT, seconds)]


def coverage_checks(db_path: str, sources: dict, now=None) -> list[Check]:
    """Rolling-window sources (`window_days`): ✗ when the last successful run is older than the
    window, read-only from the store (operations/coverage.py)."""
    from basecrawler.operations import coverage

    return [Check(f["name"], f["ok"], f["detail"], f["fix"], note=f["note"])
            for f in coverage.doctor_checks(db_path, sources, now)]


# ---- checks ---------------------------------------------------------------------------------
def check_ocr() -> list[Check]:
    import pytesseract

    command = shutil.which(pytesseract.pytesseract.tesseract_cmd)   # what OCR will run, found on PATH
    if command is None:
        return [Check("tesseract", False, "not found on PATH", OCR_PACKAGES),
                Check("tesseract Japanese data", False, "cannot ask without tesseract", OCR_PACKAGES)]
    # Asked directly rather than through pytesseract.get_languages(), which answers once per process.
    try:
        answer = subprocess.run([command, "--list-langs"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return [Check("tesseract", False, f"{command} does not run ({type(exc).__name__})", OCR_PACKAGES),
                Check("tesseract Japanese data", False, "cannot ask without tesseract", OCR_PACKAGES)]
    languages = [line.strip() for line in answer.stdout.splitlines()[1:] if line.strip()]
    found = Check("tesseract", True, command)
    if "jpn" not in languages:
        return [found, Check("tesseract Japanese data", False, f"no jpn (has: {', '.join(languages) or 'none'})",
                             "sudo apt-get install tesseract-ocr-jpn")]
    return [found, Check("tesseract Japanese data", True, "jpn installed")]


def check_font() -> Check:
    for pattern in FONT_GLOBS:
        found = sorted(glob.glob(pattern))
        if found:
            return Check("OCR font", True, found[0])
    return Check("OCR font", False, "IPA Gothic not found", "sudo apt-get install fonts-ipafont-gothic")


def check_postgres(url: str) -> list[Check]:
    """Connect, open the store (which migrates it) and report the server, the schema, pg_trgm
    and whether short terms are indexed; the archive and artifacts stay on this machine
    (BASECRAWLER_DATA_DIR)."""
    from basecrawler.store.engines import redact
    from basecrawler.store.core import Store

    started = time.monotonic()
    try:
        store = Store(url)
    except Exception as exc:
        return [Check("database connection", False, f"{redact(url)}: {type(exc).__name__}: {str(exc).strip()[:200]}",
                      "check host, port, user, password and database name in BASECRAWLER_DB; "
                      "pip install 'basecrawler[pg]' for psycopg")]
    try:
        seconds = round(time.monotonic() - started, 3)
        server, schema, trgm = store.server_facts()
        indexes = store.search_indexes()
    finally:
        store.close()
    checks = [Check("database connection", True,
                    f"PostgreSQL {server} at {redact(url)} in {seconds * 1000:.0f} ms, schema version {schema}",
                    seconds=seconds),
              Check("search index", bool(trgm), "pg_trgm installed" if trgm else "pg_trgm missing",
                    "install postgresql-contrib on the server; a superuser runs CREATE EXTENSION pg_trgm"),
              _short_term_search(indexes)]
    folder = db_directory(url)
    free = shutil.disk_usage(folder if folder.exists() else Path.cwd()).free
    checks.append(Check("free disk", free >= MIN_FREE_BYTES, f"{_size(free)} free on {folder} (archive, artifacts)",
                        "free space there or set BASECRAWLER_DATA_DIR to a larger disk"))
    return checks


def _short_term_search(indexes: dict[str, str | None]) -> Check:
    """Whether every table answers a 1–2 character term (a Korean or Japanese word: 화재, 火災)
    from its index. A store made before the windows index keeps pg_trgm, where such a term
    reads the whole table: it works, so this is a note with how to switch, not a failure."""
    slow = sorted(table for table, kind in indexes.items() if kind != "windows")
    if not slow:
        return Check("short-term search", True, "the windows index on every table: terms of every length indexed")
    return Check("short-term search", True, f"{', '.join(slow)}: pg_trgm, so a 1–2 character term reads the "
                 "whole table (seconds at a million records)",
                 "open the store once with BASECRAWLER_PG_SEARCH_INDEX=windows (builds the index: "
                 "about 90 s per million records)", note=True)


def check_database(db_path: str) -> list[Check]:
    if is_postgres_url(db_path):
        return check_postgres(db_path)
    path = Path(db_path)
    # The nearest folder that exists: the store creates the missing ones below it.
    folder = path.parent.resolve()
    while not folder.exists():
        folder = folder.parent
    if path.exists():
        writable, what = os.access(path, os.W_OK) and os.access(path.parent, os.W_OK), f"{path} (exists)"
    else:
        writable, what = os.access(folder, os.W_OK), f"{path} (new, under {folder})"
    checks = [Check("database writable", writable, what,
                    None if writable else f"make {folder} writable for this user or use --db / BASECRAWLER_DB")]
    free = shutil.disk_usage(folder).free
    checks.append(Check("free disk", free >= MIN_FREE_BYTES, f"{_size(free)} free on {folder}",
                        f"free space on that disk (at least {_size(MIN_FREE_BYTES)}) or lower "
                        "BASECRAWLER_ARCHIVE_RETENTION_DAYS"))
    return checks


def check_archive(db_path: str) -> Check:
    parts = []
    for name in ("archive", "artifacts"):
        root = db_directory(db_path) / name
        files = [p for p in root.rglob("*") if p.is_file()] if root.is_dir() else []
        parts.append(f"{name} {_size(sum(p.stat().st_size for p in files))} in {len(files)} files")
    return Check("archive size", True, ", ".join(parts))


def check_reachable(name: str, url: str, *, timeout_s: float, user_agent: str = DEFAULT_USER_AGENT) -> Check:
    started = time.monotonic()
    try:
        with httpx.Client(timeout=timeout_s, headers={"User-Agent": user_agent}) as client:
            with client.stream("GET", url) as response:   # the status is enough: no body read
                status = response.status_code
    except httpx.HTTPError as exc:
        seconds = round(time.monotonic() - started, 3)
        return Check(name, False, f"{url} unreachable after {seconds * 1000:.0f} ms ({type(exc).__name__})",
                     OFFLINE_HINT, seconds)
    seconds = round(time.monotonic() - started, 3)
    ok = status < 500
    return Check(name, ok, f"{url} answered HTTP {status} in {seconds * 1000:.0f} ms",
                 None if ok else "the host has a problem; try again later", seconds)


def scheduler_check(db_path: str, *, expected: bool = False) -> Check:
    """Running: ✓. Not running: a note (crawls run by hand or by cron/systemd need none), or
    ✗ when `expected` (`--expect-scheduler`)."""
    check = check_scheduler(db_path)
    if check.ok or expected:
        return check
    return Check(check.name, True, check.detail, "basecrawler schedule (README, Daily use), "
                 "or run crawls from cron/systemd; doctor --expect-scheduler makes this a failure", note=True)


def check_scheduler(db_path: str) -> Check:
    """Whether a scheduler holds this database's daemon lock: ✓ running, ✗ not."""
    from basecrawler.operations.scheduler import daemon_lock
    lock = daemon_lock(db_path)
    lock_path = lock.path
    fix = "start it: basecrawler schedule (README, Daily use)"
    if hasattr(lock, "url"):   # PostgreSQL: the advisory lock `schedule` holds, probed by taking it
        try:
            free = lock.try_acquire()
            holder = None if free else lock.holder_pid()
        except Exception as exc:   # the database line above says why; the checklist goes on
            return Check("scheduler", False, f"unknown: the database cannot be reached ({type(exc).__name__})",
                         "fix the database connection first (the line above)")
        finally:
            lock.release()
        if free:
            return Check("scheduler", False, "not running (its advisory lock is free)", fix)
        return Check("scheduler", True, f"running (pid {holder or '?'}, advisory lock {lock_path.name})")
    if lock_path is None or not lock_path.exists():
        return Check("scheduler", False, "not running (no lock file)", fix)
    # Probe the lock the way `schedule` holds it, on a read-only descriptor: nothing is written.
    fd = os.open(lock_path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = lock_path.read_text().strip() or "?"
        return Check("scheduler", True, f"running (pid {pid}, {lock_path.name})")
    finally:
        os.close(fd)   # closing drops a lock we may have taken
    return Check("scheduler", False, f"not running ({lock_path.name} is free)", fix)


# ---- helpers -----------------------------------------------------------------------------------
def _endpoints(source_id: str, cls) -> list[tuple[str, str]]:
    """(endpoint name, base URL after the environment override) for one source class."""
    return [(name, (endpoint_override(source_id, name) or base).rstrip("/") + "/")
            for name, base in sorted(getattr(cls, "endpoints", {}).items())]


def check_translation_backend(environ) -> Check:
    """The configured backend translates one short text through the call `translate` makes
    (`Backend.probe()`), with the timeout `translate` uses (a local model may take seconds to
    load) and no retries. A failure's fix names the backend (`Backend.fix_for()`)."""
    name = "translation backend"
    if not (environ.get("BASECRAWLER_TRANSLATE_BACKEND") or "").strip():
        return Check(name, True, "none configured: rows stay pending", "README, Translate (a local backend needs "
                     "no account: scripts/translator sets up LibreTranslate; or Ollama)", note=True)
    backend_from_env = translation_backend_factory()   # the optional translation package, via its entry point
    if backend_from_env is None:
        return Check(name, False, "the translation package is not installed", "run scripts/setup")
    try:
        backend = backend_from_env(environ, retry_waits_s=())
    except ConfigError as exc:
        return Check(name, False, str(exc), "see `basecrawler translate --help`")
    name = f"translation backend {backend.name}"
    started = time.monotonic()
    try:
        detail = backend.probe()
    except CrawlerError as exc:   # the backend's classified failures (translate.errors)
        seconds = round(time.monotonic() - started, 3)
        return Check(name, False, str(exc), backend.fix_for(exc), seconds)
    finally:
        backend.close()
    seconds = round(time.monotonic() - started, 3)
    if backend.name != "libretranslate":
        return Check(name, True, detail, seconds=seconds)
    # Which languages it translates into Korean (GET /languages): a missing model fails here,
    # not as every Japanese row failing later.
    sources = libretranslate_sources(environ["BASECRAWLER_LIBRETRANSLATE_URL"].strip())
    if sources is None:
        return Check(name, True, f"{detail}; its languages are not listed", seconds=seconds)
    missing = [lang for lang in NEEDED_LANGUAGES if lang not in sources]
    detail = f"{detail}; into Korean from {', '.join(sorted(sources)) or 'nothing'}"
    if missing:
        return Check(name, False, f"{detail}; missing {', '.join(missing)}",
                     "scripts/translator (installs the en, ja, fr, de → ko models)", seconds)
    return Check(name, True, detail, seconds=seconds)


NEEDED_LANGUAGES = ("en", "ja", "fr", "de")   # the publishers' languages (ko is never sent)


def libretranslate_sources(url: str, timeout_s: float = 5.0) -> set[str] | None:
    """The languages a LibreTranslate server translates into Korean, from GET /languages
    ([{code, targets}]); None when it does not list them."""
    try:
        answer = httpx.get(url.rstrip("/") + "/languages", timeout=timeout_s)
        languages = answer.json() if answer.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    if not isinstance(languages, list):
        return None
    return {str(item.get("code")) for item in languages
            if isinstance(item, dict) and "ko" in (item.get("targets") or []) and item.get("code") != "ko"}


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"
