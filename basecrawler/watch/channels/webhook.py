"""The webhook: one JSON POST per delivery, signed with HMAC-SHA256 over the body
(`X-Basecrawler-Signature: sha256=<hex>`), the delivery id and time in headers so a
receiver's retry is idempotent. A deadline bounds each POST as a whole (a receiver that
never answers, or drips its answer, costs at most that); redirects are never followed (a
3xx is a failure, and one towards a private address is refused for good); the URL's host
must resolve to public addresses only unless BASECRAWLER_WATCH_ALLOW_PRIVATE=1."""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx

from basecrawler.errors import CrawlerError

ALLOW_PRIVATE_ENV = "BASECRAWLER_WATCH_ALLOW_PRIVATE"
TIMEOUT_ENV = "BASECRAWLER_WATCH_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 10.0


class Refused(CrawlerError):
    """An address the SSRF rules do not let a webhook reach."""
    kind = "webhook_refused"


@dataclass
class Outcome:
    ok: bool
    error: str | None = None
    final: bool = False      # no retry can help (a refused address)


def timeout_s() -> float:
    try:
        return float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_S)
    except ValueError:
        return DEFAULT_TIMEOUT_S


def private_allowed() -> bool:
    return os.environ.get(ALLOW_PRIVATE_ENV, "").strip() == "1"


def _resolve(host: str) -> list[str]:
    return sorted({info[4][0] for info in socket.getaddrinfo(host, None)})


def check_address(url: str, resolve=_resolve) -> None:
    """Refused unless every address of the URL's host is public (or private ones are allowed)."""
    host = urlsplit(url).hostname
    if not host:
        raise Refused(f"no host in {url!r}")
    if private_allowed():
        return
    try:
        addresses = [host] if _is_ip(host) else resolve(host)
    except OSError as exc:
        raise Refused(f"{host}: cannot resolve ({exc})") from None
    for address in addresses:
        ip = ipaddress.ip_address(address.split("%")[0])
        if not ip.is_global or ip.is_multicast:
            raise Refused(f"{host} is a private or loopback address ({ip}); set {ALLOW_PRIVATE_ENV}=1 to allow")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def body_of(row: dict, watch_name: str) -> bytes:
    document = {"delivery_id": row["delivery_id"], "watch": watch_name, "change": row["change"],
                "queued_at": row["created_at"], "record": row["payload"]}
    return json.dumps(document, ensure_ascii=False, sort_keys=True, default=str).encode("utf-8")


def sign(key: str, body: bytes) -> str:
    return "sha256=" + hmac.new(key.encode("utf-8"), body, hashlib.sha256).hexdigest()


def send(url: str, row: dict, watch_name: str, key, *, transport=None, resolve=_resolve,
         clock=time.time) -> Outcome:
    """One delivery; never raises."""
    try:
        check_address(url, resolve)
    except Refused as exc:
        return Outcome(False, f"refused: {exc}", final=True)
    if key is None:
        return Outcome(False, "no signing key (set the watch's --secret-env variable or --secret-file)")
    body = body_of(row, watch_name)
    headers = {"Content-Type": "application/json; charset=utf-8", "User-Agent": "basecrawler-watch",
               "X-Basecrawler-Delivery": row["delivery_id"], "X-Basecrawler-Timestamp": str(int(clock())),
               "X-Basecrawler-Signature": sign(key.reveal(), body)}
    deadline = timeout_s()
    client = httpx.Client(timeout=httpx.Timeout(deadline), follow_redirects=False, transport=transport)
    result: dict = {}

    def post():
        try:
            result["response"] = client.post(url, content=body, headers=headers)
        except Exception as exc:   # any transport failure is one failed attempt
            result["error"] = f"{type(exc).__name__}: {exc}"

    worker = threading.Thread(target=post, daemon=True)
    worker.start()
    worker.join(deadline + 1.0)
    if worker.is_alive():
        client.close()   # cuts the socket: the thread ends
        return Outcome(False, f"no answer within {deadline:g} s")
    client.close()
    if "error" in result:
        return Outcome(False, result["error"])
    response = result["response"]
    if 200 <= response.status_code < 300:
        return Outcome(True)
    if 300 <= response.status_code < 400:
        target = urljoin(url, response.headers.get("location", ""))
        try:
            check_address(target, resolve)
        except Refused as exc:
            return Outcome(False, f"redirect refused: {exc}", final=True)
        return Outcome(False, f"HTTP {response.status_code}: redirects are not followed ({target})")
    return Outcome(False, f"HTTP {response.status_code}")


def probe(url: str, *, transport=None, resolve=_resolve) -> str | None:
    """`doctor`: whether the receiver's address is allowed and it accepts a connection (a HEAD,
    nothing delivered); None when fine, else the problem."""
    try:
        check_address(url, resolve)
        with httpx.Client(timeout=httpx.Timeout(timeout_s()), follow_redirects=False, transport=transport) as client:
            client.head(url)
    except Refused as exc:
        return f"refused: {exc}"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None
