"""The client's own transport: httpx's default one, rebuilt on httpcore's public API so that
its connection pool reads through our network backend.

httpx offers no public way to hand `HTTPTransport` a network backend, but httpcore's
`ConnectionPool(network_backend=...)` takes one; `DeadlineTransport` is the few lines of
`HTTPTransport` that matter for a plain (proxy-less) client: build the pool, turn an
`httpx.Request` into an `httpcore.Request`, and map httpcore's exceptions onto httpx's, so the
rest of the client sees the same `httpx.TimeoutException` / `httpx.NetworkError` as before.

- `DeadlineBackend`: every socket read, write and connect of a thread is capped at that
  thread's deadline (`with backend.deadline(until):`), so headers dribbled one byte at a time
  are bounded too (httpx's own timeout is per read: each byte resets it);
- `abort()` shuts every open socket down, which wakes a read blocked in any thread at once (a
  stop request), and no new connection is made after it.

Injected transports (tests' MockTransport, replay) have no sockets: their bodies are still
bounded by bounded.iter_decoded.
"""
from __future__ import annotations

import contextlib
import socket
import threading
import time
import weakref
from typing import Iterator

import httpcore
import httpx

# httpx's default pool size (httpx.HTTPTransport uses the same numbers).
MAX_CONNECTIONS = 100
MAX_KEEPALIVE = 20
KEEPALIVE_EXPIRY_S = 5.0

# httpcore's exception → httpx's, most specific first: the first match wins.
_EXCEPTIONS: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


def httpx_error(exc: Exception) -> type[httpx.HTTPError] | None:
    """The httpx exception class standing for an httpcore one (None: not an httpcore error)."""
    for core, mapped in _EXCEPTIONS:
        if isinstance(exc, core):
            return mapped
    return None


@contextlib.contextmanager
def _mapped_errors() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        mapped = httpx_error(exc)
        if mapped is None:
            raise
        raise mapped(str(exc)) from exc


class DeadlineTransport(httpx.BaseTransport):
    """A plain HTTP/1.1 transport whose sockets are a `DeadlineBackend`'s (see the module)."""

    def __init__(self, *, verify: bool = True):
        self.backend = DeadlineBackend()
        self.pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify), max_connections=MAX_CONNECTIONS,
            max_keepalive_connections=MAX_KEEPALIVE, keepalive_expiry=KEEPALIVE_EXPIRY_S, http1=True, http2=False,
            network_backend=self.backend,
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=request.url.raw_scheme, host=request.url.raw_host, port=request.url.port,
                             target=request.url.raw_path),
            headers=request.headers.raw, content=request.stream, extensions=request.extensions,
        )
        with _mapped_errors():
            response = self.pool.handle_request(core_request)
        return httpx.Response(status_code=response.status, headers=response.headers,
                              stream=_ResponseStream(response.stream), extensions=response.extensions)

    def close(self) -> None:
        self.pool.close()


class _ResponseStream(httpx.SyncByteStream):
    def __init__(self, core_stream):
        self.core_stream = core_stream

    def __iter__(self) -> Iterator[bytes]:
        with _mapped_errors():
            yield from self.core_stream

    def close(self) -> None:
        if hasattr(self.core_stream, "close"):
            self.core_stream.close()


class DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend | None = None):
        self.inner = inner or httpcore.SyncBackend()
        self._local = threading.local()
        self._sockets: weakref.WeakSet = weakref.WeakSet()
        self.aborted = False

    @contextlib.contextmanager
    def deadline(self, until: float):
        """Every socket operation of this thread inside the block ends by `until` (monotonic)."""
        previous = getattr(self._local, "until", None)
        self._local.until = until
        try:
            yield
        finally:
            self._local.until = previous

    def cap(self, timeout: float | None, error=httpcore.ReadTimeout) -> float | None:
        if self.aborted:
            raise httpcore.ReadError("stopped")
        until = getattr(self._local, "until", None)
        if until is None:
            return timeout
        remaining = until - time.monotonic()
        if remaining <= 0:
            raise error("request deadline passed")
        return remaining if timeout is None else min(timeout, remaining)

    def abort(self) -> None:
        """Shut every open socket down: a blocked read returns at once (end of stream), and
        no new connection is made. Safe inside a signal handler: no lock is taken."""
        self.aborted = True
        for _ in range(3):   # another thread adding a socket meanwhile: try the copy again
            try:
                sockets = list(self._sockets)
                break
            except RuntimeError:
                continue
        else:
            sockets = []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def track(self, stream):
        """A stream read under this backend's deadlines, its socket shut down on a stop."""
        sock = stream.get_extra_info("socket")
        if sock is not None:
            self._sockets.add(sock)
        return _DeadlineStream(stream, self)

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        timeout = self.cap(timeout, httpcore.ConnectTimeout)
        return self.track(self.inner.connect_tcp(host, port, timeout=timeout, local_address=local_address,
                                                  socket_options=socket_options))

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        timeout = self.cap(timeout, httpcore.ConnectTimeout)
        return self.track(self.inner.connect_unix_socket(path, timeout=timeout, socket_options=socket_options))

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner, backend: DeadlineBackend):
        self.inner = inner
        self.backend = backend

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.inner.read(max_bytes, self.backend.cap(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.inner.write(buffer, self.backend.cap(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self.inner.close()

    def start_tls(self, ssl_context, server_hostname=None, timeout=None):
        tls = self.inner.start_tls(ssl_context, server_hostname=server_hostname,
                                   timeout=self.backend.cap(timeout, httpcore.ConnectTimeout))
        return self.backend.track(tls)   # the TLS socket replaces the plain one (detached)

    def get_extra_info(self, info: str):
        return self.inner.get_extra_info(info)


__all__ = ["DeadlineTransport", "DeadlineBackend", "httpx_error"]
