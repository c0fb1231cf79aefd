"""`basecrawler translate`: fill the Korean columns of pending rows with the configured backend.

Registered with the basecrawler command line through the entry point `basecrawler.commands`
(pyproject.toml), so basecrawler/ never imports this package."""
from __future__ import annotations

import argparse
import os
import sys

from basecrawler.errors import EXIT_OK, Interrupted
from basecrawler.store.core import Store

from translate.errors import BackendUnavailable, NoBackendConfigured

HELP_EPILOG = """\
backends (environment):
  BASECRAWLER_TRANSLATE_BACKEND        libretranslate | deepl | openai
  BASECRAWLER_LIBRETRANSLATE_URL       LibreTranslate server, e.g. http://127.0.0.1:5000
  BASECRAWLER_LIBRETRANSLATE_API_KEY   only if that server wants one
  BASECRAWLER_DEEPL_API_KEY            DeepL API key (":fx" keys use api-free.deepl.com)
  BASECRAWLER_DEEPL_URL                optional DeepL host override
  BASECRAWLER_OPENAI_BASE_URL          OpenAI-compatible chat endpoint (default https://api.openai.com/v1)
  BASECRAWLER_OPENAI_MODEL             model name (required for openai)
  BASECRAWLER_OPENAI_API_KEY           key (required for api.openai.com)
  BASECRAWLER_TRANSLATE_TIMEOUT        seconds per request (default 60)
  BASECRAWLER_TRANSLATE_CONCURRENCY    requests in flight at once (libretranslate 4, deepl 2, openai 4)
  BASECRAWLER_TRANSLATE_BATCH          rows per batch (default 100)
  BASECRAWLER_GLOSSARY                 glossary CSV (source,korean[,lang]; korean "=" keeps the term)

  BASECRAWLER_TRANSLATE_LEASE          seconds a worker's claims outlive its last sign of life (default 120)

exit codes: 0 done (failed/blocked rows are counted, not errors), 1 backend down / rate-limited /
out of quota (rows stay pending), 2 no backend configured (with rows pending) or bad usage, 130 stopped by SIGTERM /
Ctrl-C (rows in flight stay pending)."""


def register(sub) -> None:
    parser = sub.add_parser(
        "translate", help="translate pending rows into Korean (resumable)",
        description="Translate rows whose translated_at is empty, newest recall first, in batches. "
                    "Safe to stop at any moment and start again.",
        epilog=HELP_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=_positive, metavar="N", help="stop after N rows")
    parser.add_argument("--retry", action="append", choices=["failed", "blocked"],
                        help="re-queue rows that failed or were blocked before translating (repeatable)")
    parser.add_argument("--glossary", metavar="CSV", help="glossary file (env BASECRAWLER_GLOSSARY)")
    parser.add_argument("--batch-size", type=_positive, metavar="N", help="rows per batch (env BASECRAWLER_TRANSLATE_BATCH)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    # Also accepted after the sub-command, so `python -m translate --db X` works.
    parser.add_argument("--db", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    parser.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    parser.set_defaults(func=cmd_translate)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"not a positive number: {text!r}")
    return value


def cmd_translate(args) -> int:
    from translate.backends import CONFIGURE_HELP, backend_from_env
    from translate.glossary import Glossary
    from basecrawler.operations.progress import ProgressBar
    from basecrawler.pipeline.runner import stop_on_signals
    from translate.originals import settle_originals
    from translate.worker import count_pending, translate_pending

    backend = backend_from_env(os.environ)
    store = Store(args.settings.db_path)
    try:
        if backend is None:
            # Korean originals need no backend: settled, and counted, even without one.
            settled = settle_originals(store)
            if settled:
                print(f"translate: already Korean {settled} (their originals are their Korean fields)")
            pending = count_pending(store)
            if not pending:
                return EXIT_OK
            print(f"translate: {CONFIGURE_HELP}\n{pending} rows pending.", file=sys.stderr)
            return NoBackendConfigured.exit_code
        glossary = Glossary.load(args.glossary) if args.glossary else None   # None: BASECRAWLER_GLOSSARY
        bar = None if args.no_progress else ProgressBar.for_terminal()
        try:
            # SIGTERM / Ctrl-C stop the run within a fraction of a second, claims given back.
            with stop_on_signals() as stop:
                report = translate_pending(store, backend, limit=args.limit, retry=args.retry, progress=bar,
                                           glossary=glossary, batch_rows=args.batch_size, stop=stop)
        finally:
            if bar:
                bar.close()
            backend.close()
    finally:
        store.close()
    print(report.summary_line())
    if report.backend_down:
        print(f"translate: stopped, {report.pending} rows stay pending; run again when the backend is back "
              f"({report.error})", file=sys.stderr)
        return BackendUnavailable.exit_code
    if report.stopped:
        print(f"translate: stopped on request, {report.pending} rows stay pending", file=sys.stderr)
        return Interrupted.exit_code
    return EXIT_OK
