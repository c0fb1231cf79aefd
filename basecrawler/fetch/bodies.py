"""What the client hands back for a body that lives on disk, not in memory."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import httpx


@dataclass
class Download:
    """A streamed body written to a temp file (see `HttpClient.download_to_file`). Used as a
    context manager it owns that file: `with self.http.download_to_file(url) as download:`
    removes it when the block ends, however it ends."""
    path: Path
    sha256: str
    size: int
    response: httpx.Response

    def __enter__(self) -> "Download":
        return self

    def __exit__(self, *exc_info) -> None:
        self.path.unlink(missing_ok=True)


def decoded_headers(response: httpx.Response) -> list[tuple[str, str]]:
    """Headers for the decoded body: without the encoding and length of what came on the wire."""
    return [(k, v) for k, v in response.headers.multi_items()
            if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]


class FileStream(httpx.SyncByteStream):
    """A response body read from an open file, 64 KB at a time."""

    def __init__(self, handle):
        self.handle = handle

    def __iter__(self):
        while chunk := self.handle.read(1 << 16):
            yield chunk


__all__ = ["Download", "FileStream", "decoded_headers"]
