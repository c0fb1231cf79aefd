"""Network guard for the test suite: a connection (or a name lookup) to anything but the
loopback interface is refused and reported.

In the pytest process `tests/conftest.py` installs it and fails the test that tried. Child
processes started by tests get it as this `sitecustomize` (conftest puts this folder first on
PYTHONPATH and names a report file in NETGUARD_LOG); each attempt is appended to that file, and
the test that started the child fails too.
"""
from __future__ import annotations

import ipaddress
import os
import socket
import sys

LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", ""}
_installed = False
violations: list[str] = []


def is_loopback(host) -> bool:
    if host is None:
        return True                       # getaddrinfo(None, port): a local, passive address
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    host = str(host).strip("[]").lower()
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _report(what: str) -> None:
    violations.append(what)
    path = os.environ.get("NETGUARD_LOG")
    if path:
        try:
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(f"pid {os.getpid()}: {what}\n")
        except OSError:
            pass
    print(f"netguard: blocked {what}", file=sys.stderr)


def _address_host(family, address):
    if family == getattr(socket, "AF_UNIX", None) or not isinstance(address, tuple):
        return None                       # a Unix socket path: local by definition
    return address[0]


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
    real_getaddrinfo, real_create_connection = socket.getaddrinfo, socket.create_connection

    def connect(self, address):
        host = _address_host(self.family, address)
        if not is_loopback(host):
            _report(f"connect to {address!r}")
            raise ConnectionRefusedError(111, f"netguard: no network in tests ({host})")
        return real_connect(self, address)

    def connect_ex(self, address):
        host = _address_host(self.family, address)
        if not is_loopback(host):
            _report(f"connect_ex to {address!r}")
            return 111
        return real_connect_ex(self, address)

    def getaddrinfo(host, *args, **kwargs):
        if not is_loopback(host):
            _report(f"name lookup of {host!r}")
            raise socket.gaierror(socket.EAI_NONAME, f"netguard: no network in tests ({host})")
        return real_getaddrinfo(host, *args, **kwargs)

    def create_connection(address, *args, **kwargs):
        if not is_loopback(address[0]):
            _report(f"create_connection to {address!r}")
            raise ConnectionRefusedError(111, f"netguard: no network in tests ({address[0]})")
        return real_create_connection(address, *args, **kwargs)

    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex
    socket.getaddrinfo, socket.create_connection = getaddrinfo, create_connection


if os.environ.get("NETGUARD_LOG"):
    install()
