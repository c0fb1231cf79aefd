"""Offline record / replay of HTTP exchanges (`run --record DIR`, `run --replay DIR`).

Layout, easy to author by hand or by a fixture script:
    DIR/<host>/<key>.json   {"method", "url", "status", "headers"}
    DIR/<host>/<key>.body   the response body, byte for byte
`<key>` is derived from method + path + sorted query (not the port), so a replay set made
against the real host serves the same request wherever it goes. Use `save_exchange()` to add
one. A request with no recorded exchange raises ReplayMiss naming the URL: never a silent gap.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx

from basecrawler.store.engines import is_postgres_url
from basecrawler.errors import ReplayMiss

# The replay set that comes with a source checkout (absent from an installed wheel).
DEFAULT_REPLAY_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "replay"


def exchange_key(method: str, url: str) -> tuple[str, str]:
    """(host folder, file stem) for a request."""
    parts = urlsplit(url)
    query = urlencode(sorted(parse_qsl(parts.query, keep_blank_values=True)))
    target = parts.path + ("?" + query if query else "")
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", target).strip("_")[:80] or "root"
    digest = hashlib.sha256(f"{method.upper()} {target}".encode()).hexdigest()[:16]
    host = (parts.hostname or "localhost").lower()
    return host, f"{method.upper()}_{readable}_{digest}"


def save_exchange(directory: str | Path, url: str, body: bytes | str, *, status: int = 200,
                  headers: dict | None = None, method: str = "GET") -> Path:
    host, stem = exchange_key(method, url)
    folder = Path(directory) / host
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(body, str):
        body = body.encode("utf-8")
    meta = {"method": method.upper(), "url": url, "status": status, "headers": headers or {}}
    (folder / f"{stem}.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (folder / f"{stem}.body").write_bytes(body)
    return folder / f"{stem}.json"


class ReplayTransport(httpx.BaseTransport):
    """Serves requests from the directory. `rewrite(url)` (a source's `public_url`, when its
    endpoint is overridden) is looked up first, then the URL as requested."""

    def __init__(self, directory: str | Path, *, rewrite=None):
        self.directory = Path(directory)
        self.rewrite = rewrite
        if not self.directory.is_dir():
            raise ReplayMiss(f"replay directory {self.directory} does not exist")

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        urls = dict.fromkeys([self.rewrite(str(request.url)) if self.rewrite else str(request.url), str(request.url)])
        paths = [self.directory / host / f"{stem}.json" for host, stem in (exchange_key(request.method, u) for u in urls)]
        meta_path = next((p for p in paths if p.exists()), None)
        if meta_path is None:
            raise ReplayMiss(f"no recorded exchange for {request.method} {request.url} (expected {paths[0]})")
        host, stem = meta_path.parent.name, meta_path.stem
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        body = (self.directory / host / f"{stem}.body").read_bytes()
        return httpx.Response(meta.get("status", 200), headers=meta.get("headers") or {}, content=body, request=request)


class RecordingTransport(httpx.BaseTransport):
    """Passes requests to the real transport and saves every exchange into the directory.

    `rewrite(url)` gives the URL an exchange is saved under: a source recording behind an
    endpoint override passes its `public_url`, so a request to http://127.0.0.1:8000/x is
    saved as https://<declared host>/x and replays wherever the source really fetches it."""

    KEPT_HEADERS = ("content-type", "etag", "last-modified", "retry-after", "content-range")

    def __init__(self, inner: httpx.BaseTransport, directory: str | Path, *, rewrite=None):
        self.inner = inner
        self.directory = Path(directory)
        self.rewrite = rewrite or (lambda url: url)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        body = response.read()
        headers = {k: v for k, v in response.headers.items() if k.lower() in self.KEPT_HEADERS}
        save_exchange(self.directory, self.rewrite(str(request.url)), body, status=response.status_code,
                      headers=headers, method=request.method)
        passed = [(k, v) for k, v in response.headers.items() if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
        return httpx.Response(response.status_code, headers=passed, content=body, request=request)

    def close(self) -> None:
        self.inner.close()


def offline_hint(db_path: str, *, replay_dir: Path = DEFAULT_REPLAY_DIR, cwd: Path | None = None,
                 environ=os.environ) -> str:
    """The line shown when every source was unreachable: one command that works typed in the
    same shell. Called through scripts/run (which exports BASECRAWLER_LAUNCHER as it was
    typed): that script with `--replay`. Otherwise this very Python (the venv's, so no
    activation is needed) with `-m basecrawler`, the same database and the replay folder."""
    lead = "every source was unreachable (offline?); to fill the store from the recorded replay set instead, type:"
    if not replay_dir.is_dir():
        return (f"every source was unreachable (offline?); no replay set here ({replay_dir} comes with the "
                "source checkout): check the network or proxy")
    launcher = environ.get("BASECRAWLER_LAUNCHER")
    if launcher:
        return f"{lead} {shlex.quote(launcher)} --replay"
    here = os.path.abspath(cwd or os.getcwd())

    def shown(path) -> str:
        # Relative when under the working directory, else absolute; symlinks kept as they are
        # (a venv's python is a symlink to the system one, which lacks the packages).
        path = os.path.abspath(path)
        return os.path.relpath(path, here) if path.startswith(here + os.sep) else path

    command = [shown(sys.executable), "-m", "basecrawler"]
    if db_path != "basecrawler.db" and not is_postgres_url(db_path):   # a URL may hold a password
        command += ["--db", shown(db_path)]
    command += ["run", "--all", "--mode", "full", "--replay", shown(replay_dir)]
    return f"{lead} {shlex.join(command)}"
