"""Helpers of the watch tests: product alerts of `hc` and `eu`, and a webhook receiver on
127.0.0.1 that keeps each POST's headers and body."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from record_types.product_alert import ProductAlert

SEEN = "2026-01-01T00:00:00+00:00"


def alert(source: str, n: int, *, title: str, category: str, country: str = "CA", **extra) -> tuple[str, ProductAlert]:
    return source, ProductAlert(country=country, alert_id=f"{source}-{n}", alert_date="2025-03-01",
                                title_original=title, category=[category], source_url=f"https://example.org/{source}/{n}",
                                **extra)


def store_alerts(store, items) -> None:
    by_source: dict[str, list] = {}
    for source, record in items:
        by_source.setdefault(source, []).append(record)
    for source, records in by_source.items():
        store.upsert("product_alert", records, source=source)


def food_listeria_set():
    """Two of hc and one of eu match category=Food and "Listeria"; the others miss one of the two."""
    return [
        alert("hc", 1, title="Listeria in cheese", category="Food"),
        alert("hc", 2, title="Listeria monocytogenes in salad", category="Food"),
        alert("hc", 3, title="Salmonella in eggs", category="Food"),
        alert("hc", 4, title="Listeria warning on a toy", category="Toys"),
        alert("eu", 1, title="Listeria in smoked fish", category="Food", country="FR"),
        alert("eu", 2, title="Lead in a mug", category="Food", country="DE"),
    ]


class Receiver:
    """`answer(n)` → (status, headers, delay_s) for the n-th POST (0-based)."""

    def __init__(self, answer=lambda n: (200, {}, 0.0)):
        self.answer = answer
        self.posts: list[tuple[dict, bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                n = len(outer.posts)
                outer.posts.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status, headers, delay = outer.answer(n)
                if delay:
                    time.sleep(delay)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_HEAD = do_POST

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def titles(self) -> list[str]:
        return sorted(json.loads(body)["record"]["title_original"] for _, body in self.posts)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
