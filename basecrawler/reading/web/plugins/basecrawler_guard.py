"""Datasette plugin: what the web view sends never executes (issue #22.4).

- Every response carries a Content-Security-Policy: scripts only from this server, plus the
  inline scripts Datasette and its plugins render with fixed content, allowed by their SHA-256
  hash (computed at start-up from the installed templates and `extra_body_script` hooks, so a
  Datasette upgrade keeps working). A record's text can never produce an allowed script: its
  hash would have to be one of these. Inline styles stay allowed (Datasette's pages and
  Vega-Embed use them; a style cannot run code).
- The CSV download is formula-safe: a text cell starting with = + - @ TAB or CR gets a leading
  `'` (OWASP's CSV-injection rule), so a spreadsheet shows it as text. Numbers stay numbers.
  JSON is left exact: it is the API the chart and scripts read, and no spreadsheet evaluates a
  JSON string as a formula.
"""
from __future__ import annotations

import base64
import csv
import hashlib
import inspect
import io
import re
from pathlib import Path

import datasette as datasette_package
from datasette import hookimpl
from datasette.plugins import pm

try:   # the project's one rule (basecrawler/reading/cellsafe.py, the CSV and XLSX exports use it)
    from basecrawler.reading.cellsafe import neutralise_cell as _shared_neutralise
except ImportError:   # until it lands: the same rule, here
    _shared_neutralise = None

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")
INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)

POLICY = ("default-src 'self'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
          "img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")

_script_hashes: set[str] = set()


def script_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def _template_scripts() -> list[str]:
    """Inline scripts of Datasette's own templates that contain no template code, and the one
    that does but only takes a boolean (table.html's DATASETTE_ALLOW_FACET)."""
    scripts = []
    for template in (Path(datasette_package.__file__).parent / "templates").glob("*.html"):
        for body in INLINE_SCRIPT.findall(template.read_text("utf-8")):
            if "{{" not in body and "{%" not in body:
                scripts.append(body)
    scripts += [f"DATASETTE_ALLOW_FACET = {value};" for value in ("true", "false")]
    return scripts


@hookimpl
def startup(datasette):
    async def collect():
        scripts = _template_scripts()
        # Plugins' body scripts (datasette-leaflet's settings): fixed per server.
        for result in pm.hook.extra_body_script(template="base.html", database=None, table=None,
                                                          columns=None, view_name="index", request=None,
                                                          datasette=datasette):
            while callable(result) or inspect.isawaitable(result):
                result = result() if callable(result) else await result
            if isinstance(result, dict):
                result = result.get("script")
            if result:
                scripts.append(str(result))
        _script_hashes.update(script_hash(s) for s in scripts)
    return collect


def content_security_policy() -> str:
    return POLICY.format(hashes=" ".join(sorted(_script_hashes)))


def neutralise(value: str) -> str:
    """A CSV cell as a spreadsheet must read it: text that would start a formula, prefixed.
    In CSV every cell is text, so a cell that is a plain number (-12.5) is left as it is."""
    if NUMBER.fullmatch(value):
        return value
    if _shared_neutralise is not None:
        return _shared_neutralise(value)
    return "'" + value if value.startswith(FORMULA_START) else value


def neutralise_csv(body: bytes, charset: str = "utf-8") -> bytes:
    text = body.decode(charset)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    for row in csv.reader(io.StringIO(text, newline="")):
        writer.writerow([neutralise(cell) for cell in row])
    return out.getvalue().encode(charset)


def _is_csv(scope) -> bool:
    if scope["path"].endswith(".csv"):
        return True
    return b"_format=csv" in (scope.get("query_string") or b"")


@hookimpl(trylast=True)   # applied last, so outermost: the other plugins' redirects get the headers too
def asgi_wrapper(datasette):
    def wrap(app):
        async def guarded(scope, receive, send):
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            csv_request = _is_csv(scope)
            start: dict = {}
            chunks: list[bytes] = []

            async def guarded_send(message):
                if message["type"] == "http.response.start":
                    headers = [(k, v) for k, v in message.get("headers", [])
                               if k.lower() not in (b"content-security-policy", b"x-content-type-options")]
                    headers += [(b"content-security-policy", content_security_policy().encode("ascii")),
                                (b"x-content-type-options", b"nosniff")]
                    message = {**message, "headers": headers}
                    if csv_request:
                        start.update(message)   # sent with the rewritten body's length
                        return
                elif message["type"] == "http.response.body" and csv_request:
                    chunks.append(message.get("body", b""))
                    if message.get("more_body"):
                        return
                    body = b"".join(chunks)
                    if start.get("status") == 200:
                        body = neutralise_csv(body)
                    headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
                    headers.append((b"content-length", str(len(body)).encode("ascii")))
                    await send({**start, "headers": headers})
                    message = {"type": "http.response.body", "body": body}
                await send(message)

            await app(scope, receive, guarded_send)
        return guarded
    return wrap
