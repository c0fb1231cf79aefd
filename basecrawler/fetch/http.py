"""`self.http`: one HTTP client per run with the shared policy of every source.

- the policy in layers (policy.py joins them): per-host politeness shared by all threads
  (hosts.py), what an outcome means (classify.py, pure), what to do next — retry, pause the
  host, give up — (decide.py, pure), and the exchange itself (this module, transport.py);
- conditional requests (ETag / Last-Modified) with 304 served from the raw archive;
- every body archived by sha256, and `--record` / `--replay` for offline runs;
- every body bounded while it streams (bounded.py): size on the wire and decoded, the
  decompression ratio, a total deadline and a minimum rate; documents held in memory far lower
  than downloads streamed to disk (Settings.max_document_bytes / max_download_bytes);
- a stop request (stopping.StopEvent) shuts the client's sockets down: a blocked read ends at
  once and the exchange raises Interrupted, never a retry.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

import httpx

from basecrawler.fetch import partials
from basecrawler.fetch.archive import Archive
from basecrawler.fetch.bounded import ACCEPT_ENCODING, Limits, iter_decoded
from basecrawler.fetch.bodies import Download, FileStream, decoded_headers
# classify, parse_retry_after, HostThrottle, host_allowed and host_key are also re-exported:
# this module was their home before the policy's layers.
from basecrawler.fetch.classify import classify, has_credentials, parse_retry_after
from basecrawler.fetch.decide import Budget
from basecrawler.fetch.hosts import HostThrottle, HostThrottles, host_allowed, host_key
from basecrawler.fetch.policy import Policy, Stats
from basecrawler.fetch.revalidate import archive_body, conditional_headers, copy_stored, record, stored_response
from basecrawler.fetch.transport import DeadlineBackend, DeadlineTransport
from basecrawler.config import Settings
from basecrawler.fetch.partials import partial_prefix, sweep_partial_downloads  # re-exported: their home before partials.py
from basecrawler.stopping import add_stop_hook
from basecrawler.formats.textcodec import Undecodable, decode_text
from basecrawler.errors import FetchError, ForeignHost, Interrupted, TooLarge, TooSlow, UnexpectedContent

log = logging.getLogger(__name__)


class HttpClient:
    def __init__(self, *, settings: Settings | None = None, store=None, transport: httpx.BaseTransport | None = None,
                 rate_per_s: float | None = None, concurrency: int | None = None, clock=None, sleep=None,
                 source: str = "", headers: dict | None = None, archive: Archive | None = None,
                 allowed_hosts: set[str] | None = None, stop=None):
        self.settings = settings or Settings.from_env()
        self.source = source
        self._stop = stop
        self.limits = {label: self._limits(label) for label in ("document", "download")}
        # Hosts requests may go to (see BaseCrawler.download_hosts); None: anywhere.
        self.allowed_hosts = frozenset(allowed_hosts) if allowed_hosts is not None else None
        self.clock = clock or time.time
        self.sleep = sleep or time.sleep
        env_rate = self.settings.source_setting(source, "rate") if source else None
        self._throttles = HostThrottles(float(env_rate) if env_rate else rate_per_s or self.settings.rate_per_s,
                                        concurrency or self.settings.concurrency, self.clock, self.sleep)
        self.archive = archive or (Archive(store, enabled=self.settings.archive_enabled) if store is not None else None)
        if transport is None and self.settings.replay_dir:
            from basecrawler.fetch.replay import ReplayTransport
            transport = ReplayTransport(self.settings.replay_dir)
            # Replay reads files: there is no host to be polite to, so no request spacing.
            self.rate_per_s = 0.0
        # Our own transport reads through a DeadlineBackend (transport.py): per-thread deadlines
        # on every socket operation, and sockets a stop request can shut down. Injected
        # transports (tests, replay) have no sockets; their bodies are still bounded.
        self._backend: DeadlineBackend | None = None
        if transport is None:
            transport = DeadlineTransport()
            self._backend = transport.backend
        if self.settings.record_dir:
            from basecrawler.fetch.replay import RecordingTransport
            transport = RecordingTransport(transport, self.settings.record_dir)
        self._client = httpx.Client(
            transport=transport, timeout=self.settings.timeout_s, follow_redirects=True,
            # Only encodings iter_decoded inflates step by step (no brotli/zstd bombs).
            headers={"User-Agent": self.settings.user_agent, "Accept-Encoding": ACCEPT_ENCODING, **(headers or {})},
            # Every request, redirects included, is checked before it is sent.
            event_hooks={"request": [self._check_host]},
        )
        self._stats = Stats()
        self._local = threading.local()
        self.credentials_configured = False
        self._policy = Policy(budget=Budget.from_settings(self.settings), throttles=self._throttles, stats=self._stats,
                              clock=self.clock, sleep=self.sleep, stopped=self._stopped, credentials=self._credentials,
                              keep_refused=lambda url, response, body: archive_body(self.archive, url, response, body))
        add_stop_hook(stop, self.abort)

    @property
    def rate_per_s(self) -> float:
        """Requests per second to each host (0: no spacing); set it before the first request."""
        return self._throttles.rate_per_s

    @rate_per_s.setter
    def rate_per_s(self, value: float) -> None:
        self._throttles.rate_per_s = value

    @property
    def concurrency(self) -> int:
        return self._throttles.concurrency

    def _credentials(self) -> bool:
        """Whether the client itself sends credentials (a token header, or a source's say-so)."""
        return self.credentials_configured or has_credentials(self._client.headers)

    def _limits(self, label: str) -> Limits:
        bound = lambda name: self.settings.bound(self.source, name)  # noqa: E731
        return Limits(max_bytes=bound(f"max_{label}_bytes"), max_ratio=bound("max_decompression_ratio"),
                      deadline_s=bound("request_deadline_s" if label == "document" else "download_deadline_s"),
                      min_rate_bps=bound("min_rate_bps"), grace_s=bound("min_rate_grace_s"), label=label)

    # ---- public API -------------------------------------------------------------------
    def get(self, url: str, *, expect: str | None = None, conditional: bool = True, **kwargs) -> httpx.Response:
        """GET with the full policy; returns a 2xx response (a 304 comes back as the stored 200)."""
        return self._request("GET", url, expect=expect, conditional=conditional, **kwargs)

    def get_json(self, url: str, **kwargs):
        response = self.get(url, expect="json", **kwargs)
        try:
            # JSON is UTF-8 by standard, but decode through the shared helper (a BOM, a lying
            # charset); strict=False accepts raw control characters inside strings, which some
            # exports carry and which would otherwise cost a whole page.
            text = decode_text(response.content, header=response.charset_encoding, default="utf-8", sniff=False).text
            return json.loads(text, strict=False)
        except (ValueError, Undecodable) as exc:
            raise UnexpectedContent(f"body is not JSON: {exc}", url=url, status=response.status_code,
                                    body=response.content, response_sha256=self.last_sha256) from None

    def get_text(self, url: str, *, encoding: str | None = None, expect: str | None = "text", **kwargs) -> str:
        """Body as text, decoded by `textcodec.decode_text`: the Content-Type charset, the
        document's own declaration, then `encoding`, checked against the content (a legacy
        declaration over a UTF-8 body is read as UTF-8, with a WARNING). A body no candidate
        decodes is `unexpected`, not mojibake."""
        response = self.get(url, expect=expect, **kwargs)
        try:
            decoded = decode_text(response.content, header=response.charset_encoding, default=encoding or "utf-8")
        except Undecodable as exc:
            raise UnexpectedContent(f"{exc}", url=url, status=response.status_code,
                                    body=response.content, response_sha256=self.last_sha256) from None
        for note in decoded.notes:
            log.warning("%s: %s", url, note)
        return decoded.text

    def get_bytes(self, url: str, **kwargs) -> bytes:
        return self.get(url, **kwargs).content

    @contextlib.contextmanager
    def stream(self, url: str, **kwargs) -> Iterator[httpx.Response]:
        """Stream a large body: yields a response whose `iter_bytes()` / `iter_lines()` read the
        body from a temp file on disk (archived by sha256), never holding it in memory."""
        download = self.download_to_file(url, **kwargs)
        try:
            with open(download.path, "rb") as handle:
                # The file holds the decoded body: no Content-Encoding may make httpx inflate it again.
                response = httpx.Response(200, headers=decoded_headers(download.response), stream=FileStream(handle),
                                          request=download.response.request)
                yield response
        finally:
            with contextlib.suppress(FileNotFoundError):
                download.path.unlink()

    def download_to_file(self, url: str, *, headers: dict | None = None, conditional: bool = True,
                         directory: Path | None = None) -> Download:
        """Fetch a body straight to a temp file with retries; returns path, sha256 and size.
        A copy a killed or stopped process left of the same URL is resumed with Range when the
        server allows it (see partials.py)."""
        attempt_headers = dict(headers or {})
        cached = conditional_headers(self.archive, url, attempt_headers) if conditional else None
        tmp_dir = directory or (self.archive.root.parent / "tmp" if self.archive else Path(tempfile.gettempdir()))
        tmp_dir.mkdir(parents=True, exist_ok=True)
        limit = self.limits["download"]
        may_resume = True

        def send():
            fd, name = tempfile.mkstemp(dir=tmp_dir, prefix=partial_prefix(url), suffix=".part")
            os.close(fd)
            path = Path(name)
            resume = partials.claim(tmp_dir, url, path) if may_resume else None
            digest, size = hashlib.sha256(), 0
            try:
                with self._open("GET", url, headers={**attempt_headers, **(resume.headers() if resume else {})},
                                label="download") as response:
                    if resume is not None and resume.continued_by(response):
                        size, mode = partials.hash_existing(path, digest), "ab"
                        self._count("resumed")
                        log.info("%s: resuming after %d bytes", url, size)
                    elif response.status_code == 206 and resume is not None:
                        raise partials.RangeMismatch(f"206 that does not continue the partial copy: GET {url}")
                    elif response.status_code == 206:
                        raise UnexpectedContent(f"206 Partial Content to a request without Range: GET {url}", url=url,
                                                status=206)
                    elif response.status_code == 200:
                        mode = "wb"
                    else:   # an error page or a 304: read (bounded) for classification
                        return self.read_whole(response), path, None, 0
                    partials.note_resumable(path, url, response)
                    with open(path, mode) as out:
                        for chunk in self.iter_body(response, "download"):
                            size += len(chunk)
                            if size > limit.max_bytes:   # the resumed bytes count too
                                raise TooLarge(f"body over the download limit of {limit.max_bytes} bytes "
                                               f"({limit.setting}): GET {url}", url=url)
                            out.write(chunk)
                            digest.update(chunk)
            except BaseException:
                if not (self._stopped() and partials.park(path, url)):
                    partials.discard(path)
                raise
            partials.sidecar(path).unlink(missing_ok=True)
            return response, path, digest.hexdigest(), size

        for _ in range(2):
            try:
                response, path, sha, size = self._with_policy("GET", url, send, expect=None,
                                                              credentials=has_credentials(attempt_headers))
                break
            except partials.RangeMismatch as exc:
                log.warning("%s; downloading it whole", exc)
                may_resume = False
        if response.status_code == 304 and not cached:
            path.unlink()
            raise UnexpectedContent(f"304 Not Modified but no stored copy to reuse: GET {url}", url=url, status=304)
        if response.status_code == 304:
            path.unlink()
            self._count("not_modified")
            copy = copy_stored(self.archive, cached, tmp_dir, partial_prefix(url))
            self._received(url, cached["sha256"])
            return Download(copy, cached["sha256"], copy.stat().st_size, response)
        if self.archive:
            self.archive.put_file(path, sha)
            record(self.archive, url, response, sha, size)
        self._received(url, sha)
        return Download(path, sha, size, response)

    def with_policy(self, url: str, send, *, method: str = "GET", expect: str | None = None,
                    deadline: float | None = None):
        """Run a caller-built exchange under the full policy (throttle, classification,
        retries, pauses). `send()` returns an httpx.Response, or a tuple whose first item is
        one; it is called again for each retry. For downloads that manage their own bytes,
        e.g. Range resumption in `artifacts.py`. `deadline` (the client's clock): give up
        rather than wait past it for a retry."""
        return self._with_policy(method, url, send, expect=expect, deadline=deadline)

    def open_stream(self, url: str, *, headers: dict | None = None, method: str = "GET"):
        """A streaming exchange (context manager) with the client's headers, timeouts and the
        download deadline; read its body with `iter_body(response)` (bounded). No policy of
        its own — call it inside `with_policy`'s `send`."""
        return self._open(method, url, headers=headers, label="download")

    def iter_body(self, response: httpx.Response, label: str = "download") -> Iterator[bytes]:
        """The decoded body of a response from `open_stream`, within the `label` limits."""
        head = bytearray()
        until = getattr(self._local, "until", None) or time.monotonic() + self.limits[label].deadline_s
        try:
            yield from iter_decoded(response, self.limits[label], until=until, stopped=self._stopped, head=head)
        except (TooLarge, TooSlow) as exc:
            self._count(f"failed/{exc.kind}")
            self._keep_refused(exc, response)
            raise

    def abort(self) -> None:
        """The stop hook: shut the client's sockets down so any blocked read returns now."""
        if self._backend is not None:
            self._backend.abort()

    def _received(self, url: str, sha256: str | None) -> None:
        self._local.last_url, self._local.last_sha256 = url, sha256

    @property
    def last_url(self) -> str | None:
        """URL of the last body this thread received (for dead letters)."""
        return getattr(self._local, "last_url", None)

    @property
    def last_sha256(self) -> str | None:
        """sha256 of the last body this thread received (for dead letters)."""
        return getattr(self._local, "last_sha256", None)

    def stats(self) -> dict:
        return self._stats.snapshot()

    def close(self) -> None:
        if self._stop is not None and hasattr(self._stop, "remove_hook"):
            self._stop.remove_hook(self.abort)
        self._client.close()

    def _stopped(self) -> bool:
        return self._stop is not None and self._stop.is_set()

    @contextlib.contextmanager
    def _open(self, method: str, url: str, *, headers: dict | None = None, label: str = "document", **kwargs):
        """One streamed exchange whose every socket operation ends by its deadline."""
        limits = self.limits[label]
        until = time.monotonic() + limits.deadline_s
        previous = getattr(self._local, "until", None)
        self._local.until = until
        deadline = self._backend.deadline(until) if self._backend is not None else contextlib.nullcontext()
        try:
            with deadline, self._client.stream(method, url, headers=headers or {}, **kwargs) as response:
                yield response
        except httpx.TimeoutException:
            if self._stopped():
                raise Interrupted() from None
            if time.monotonic() < until:
                raise   # an ordinary timeout: transient, retried
            self._count("failed/too_slow")
            raise TooSlow(f"over the {limits.deadline_s:g}s deadline ({limits.deadline_setting}): {method} {url}",
                          url=url) from None
        finally:
            self._local.until = previous

    def read_whole(self, response: httpx.Response) -> httpx.Response:
        """A response from `open_stream` with its whole body in memory (decoded, within the
        document limits): for an error page, which the policy classifies by its content."""
        body = bytearray()
        for piece in self.iter_body(response, "document"):
            body += piece
        return httpx.Response(response.status_code, headers=decoded_headers(response), content=bytes(body),
                              request=response.request)

    def _keep_refused(self, exc: FetchError, response: httpx.Response) -> None:
        """Archive the first bytes of a refused body, so its dead letter shows what came."""
        if self.archive is None or not exc.body:
            return
        exc.response_sha256 = self.archive.put_bytes(exc.body)
        record(self.archive, str(response.request.url), response, exc.response_sha256, len(exc.body))

    # ---- internals --------------------------------------------------------------------
    def _check_host(self, request: httpx.Request) -> None:
        self._ensure_allowed(str(request.url))

    def _ensure_allowed(self, url: str) -> None:
        if not host_allowed(url, self.allowed_hosts):
            self._count("refused/foreign_host")
            raise ForeignHost(f"{host_key(url) or url} is not one of the source's hosts "
                              f"({', '.join(sorted(self.allowed_hosts or ())) or 'none'}); not requested: {url}", url=url)

    def _count(self, key: str) -> None:
        self._stats.count(key)

    def _request(self, method: str, url: str, *, expect: str | None, conditional: bool, **kwargs) -> httpx.Response:
        headers = dict(kwargs.pop("headers", None) or {})
        cached = conditional_headers(self.archive, url, headers) if conditional and method == "GET" else None

        def send():
            with self._open(method, url, headers=headers, **kwargs) as response:
                return self.read_whole(response)

        response = self._with_policy(method, url, send, expect=expect, credentials=has_credentials(headers))
        if response.status_code == 304 and not cached:
            raise UnexpectedContent(f"304 Not Modified but no stored copy to reuse: {method} {url}", url=url, status=304)
        if response.status_code == 304:
            self._count("not_modified")
            self._received(url, cached["sha256"])
            return stored_response(self.archive, cached, response.request)
        sha = None
        if self.archive and response.content is not None:
            sha = archive_body(self.archive, url, response, response.content)
        self._received(url, sha)
        return response

    def _with_policy(self, method: str, url: str, send, *, expect: str | None, credentials: bool = False,
                     deadline: float | None = None):
        self._ensure_allowed(url)  # before any throttle wait, retry or archive entry
        return self._policy.run(method, url, send, expect=expect, credentials=credentials, deadline=deadline)


__all__ = ["HttpClient", "HostThrottle", "HostThrottles", "classify", "parse_retry_after", "Download", "FetchError", "host_key",
           "host_allowed", "partial_prefix", "sweep_partial_downloads"]
