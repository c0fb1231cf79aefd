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
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx

from .errors import ReplayMiss


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
    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise ReplayMiss(f"replay directory {self.directory} does not exist")

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        host, stem = exchange_key(request.method, str(request.url))
        meta_path = self.directory / host / f"{stem}.json"
        if not meta_path.exists():
            raise ReplayMiss(f"no recorded exchange for {request.method} {request.url} (expected {meta_path})")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        body = (self.directory / host / f"{stem}.body").read_bytes()
        return httpx.Response(meta.get("status", 200), headers=meta.get("headers") or {}, content=body, request=request)


class RecordingTransport(httpx.BaseTransport):
    """Passes requests to the real transport and saves every exchange into the directory."""

    KEPT_HEADERS = ("content-type", "etag", "last-modified", "retry-after", "content-range")

    def __init__(self, inner: httpx.BaseTransport, directory: str | Path):
        self.inner = inner
        self.directory = Path(directory)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        body = response.read()
        headers = {k: v for k, v in response.headers.items() if k.lower() in self.KEPT_HEADERS}
        save_exchange(self.directory, str(request.url), body, status=response.status_code,
                      headers=headers, method=request.method)
        passed = [(k, v) for k, v in response.headers.items() if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
        return httpx.Response(response.status_code, headers=passed, content=body, request=request)

    def close(self) -> None:
        self.inner.close()
