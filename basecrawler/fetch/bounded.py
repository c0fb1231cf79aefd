"""Bounds on what one HTTP exchange may cost, whatever the server sends.

- `Limits`: the bounds of one kind of exchange (an in-memory document or a streamed download):
  bytes on the wire, bytes decoded, the decompression ratio, a total deadline, a minimum rate.
- `iter_decoded(response, limits, ...)`: the body's decoded pieces. It reads the raw bytes and
  inflates gzip/deflate itself, at most `DECODED_STEP` bytes per step, so a bomb never holds
  more than one step in memory; it raises TooLarge / TooSlow the moment a bound is passed,
  never after reading the body whole.
- the socket side (a total deadline on every socket operation, a stop that shuts sockets
  down) is the client's transport: transport.py.

Encodings other than gzip and deflate are never asked for (`ACCEPT_ENCODING`), and a body sent
with one anyway is refused: a brotli or zstd bomb is never inflated.
"""
from __future__ import annotations

import time
import zlib
from dataclasses import dataclass
from typing import Callable, Iterator

from basecrawler.errors import Interrupted, TooLarge, TooSlow, UnexpectedContent

ACCEPT_ENCODING = "gzip, deflate"
DECODED_STEP = 1 << 20        # most bytes one inflate step may produce
RATIO_FLOOR = 1 << 20         # the ratio is judged only past this many decoded bytes: a small
                              # body of repeated text compresses very well and costs nothing
HEAD_KEPT = 64 * 1024         # what a refused body keeps for its dead letter


@dataclass(frozen=True)
class Limits:
    max_bytes: int
    max_ratio: float
    deadline_s: float
    min_rate_bps: float
    grace_s: float
    label: str = "document"           # names the settings in messages: document / download

    @property
    def setting(self) -> str:
        return "BASECRAWLER_MAX_DOCUMENT_BYTES" if self.label == "document" else "BASECRAWLER_MAX_DOWNLOAD_BYTES"

    @property
    def deadline_setting(self) -> str:
        return "BASECRAWLER_REQUEST_DEADLINE_S" if self.label == "document" else "BASECRAWLER_DOWNLOAD_DEADLINE_S"


def iter_decoded(response, limits: Limits, *, until: float, stopped: Callable[[], bool] = lambda: False,
                 clock=time.monotonic, head: bytearray | None = None) -> Iterator[bytes]:
    """The decoded body of a streamed httpx response, in pieces, within `limits`; `until` is
    the exchange's deadline (monotonic seconds). `head` collects the first HEAD_KEPT bytes."""
    url = str(response.request.url) if response.request else None
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limits.max_bytes:
        raise TooLarge(f"body of {int(declared)} bytes (Content-Length) is over the {limits.label} limit of "
                       f"{limits.max_bytes} bytes ({limits.setting}); not read", url=url, status=response.status_code)
    if response.is_stream_consumed:
        # Built with its body in memory (a mock transport's or a replayed response): httpx has
        # decoded it already; only the size bounds apply.
        raws, decoder = iter((response.content,)), _Identity()
    else:
        raws, decoder = response.iter_raw(), decoder_for(response.headers.get("content-encoding", ""), url=url)
    body_started = clock()
    wire = decoded = 0

    def refuse(error_class, message):
        return error_class(message, url=url, status=response.status_code, body=bytes(head) if head else None)

    def take(piece: bytes) -> bytes:
        nonlocal decoded
        decoded += len(piece)
        if head is not None and len(head) < HEAD_KEPT:
            head.extend(piece[:HEAD_KEPT - len(head)])
        if decoded > limits.max_bytes:
            raise refuse(TooLarge, f"body over the {limits.label} limit of {limits.max_bytes} bytes decoded "
                                   f"({limits.setting}); stopped after {wire} bytes received")
        if decoded > RATIO_FLOOR and decoded > limits.max_ratio * wire:
            raise refuse(TooLarge, f"body inflates {decoded // max(wire, 1)}x, over the decompression ratio limit of "
                                   f"{limits.max_ratio:g} (BASECRAWLER_MAX_DECOMPRESSION_RATIO): a compression bomb; "
                                   f"stopped after {wire} bytes received")
        return piece

    for raw in raws:   # each piece as the socket delivers it (≤ 64 KB)
        wire += len(raw)
        if wire > limits.max_bytes:
            raise refuse(TooLarge, f"body over the {limits.label} limit of {limits.max_bytes} bytes "
                                   f"({limits.setting}); stopped while receiving")
        for piece in decoder.feed(raw):
            yield take(piece)
        if stopped():
            raise Interrupted()
        now = clock()
        if now >= until:
            raise refuse(TooSlow, f"over the {limits.deadline_s:g}s deadline ({limits.deadline_setting}) "
                                  f"after {wire} bytes")
        elapsed = now - body_started
        if elapsed > limits.grace_s and wire < limits.min_rate_bps * elapsed:
            raise refuse(TooSlow, f"{wire / elapsed:.0f} bytes/s after {elapsed:.0f}s, under the minimum rate of "
                                  f"{limits.min_rate_bps:g} bytes/s (BASECRAWLER_MIN_RATE_BPS)")
    for piece in decoder.flush():
        yield take(piece)


# ---- decoders ---------------------------------------------------------------------------------
class _Identity:
    def feed(self, data: bytes) -> Iterator[bytes]:
        if data:
            yield data

    def flush(self) -> Iterator[bytes]:
        return iter(())


class _Inflate:
    """gzip (wbits 31) or deflate, which servers send either zlib-wrapped (RFC 1950, what the
    standard says) or raw (RFC 1951): told apart by the zlib header's check bits."""

    def __init__(self, wbits: int | None, url: str | None):
        self.url = url
        self.pending = b""
        self.z = zlib.decompressobj(wbits) if wbits is not None else None

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self.z is None:
            self.pending += data
            if len(self.pending) < 2:
                return
            first, second = self.pending[0], self.pending[1]
            wrapped = first & 0x0F == 8 and (first << 8 | second) % 31 == 0
            self.z = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
            data, self.pending = self.pending, b""
        while True:
            try:
                out = self.z.decompress(data, DECODED_STEP)
            except zlib.error as exc:
                raise UnexpectedContent(f"body does not decode as its Content-Encoding says: {exc}", url=self.url) from None
            if out:
                yield out
            data = self.z.unconsumed_tail
            # Input left, or a full step (more output may be waiting): go on; else all is out.
            if self.z.eof or not data and len(out) < DECODED_STEP:
                return

    def flush(self) -> Iterator[bytes]:
        if self.z is None:
            if self.pending:
                raise UnexpectedContent("body too short for its Content-Encoding", url=self.url)
            return
        out = self.z.flush()   # everything was drained step by step: at most a little is left
        if out:
            yield out


def decoder_for(content_encoding: str, *, url: str | None = None):
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip() and c.strip().lower() != "identity"]
    if not codings:
        return _Identity()
    if len(codings) == 1 and codings[0] in ("gzip", "x-gzip"):
        return _Inflate(zlib.MAX_WBITS | 16, url)
    if len(codings) == 1 and codings[0] == "deflate":
        return _Inflate(None, url)
    raise UnexpectedContent(f"Content-Encoding {content_encoding!r} was not asked for (only {ACCEPT_ENCODING}); "
                            "body refused unread", url=url)


__all__ = ["Limits", "iter_decoded", "decoder_for", "ACCEPT_ENCODING"]
