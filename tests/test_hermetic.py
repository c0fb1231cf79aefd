"""The suite is hermetic: the network guard of tests/conftest.py refuses and reports any
connection or name lookup that is not loopback, in the test process and in its children."""
import os
import socket
import subprocess
import sys

import httpx
import pytest

from conftest import netguard, subprocess_env


@pytest.fixture
def guard_report():
    """Read (and clear) what the guard caught, so the test itself does not fail for it."""
    def take():
        netguard.violations.clear()     # the same attempts are in the report file, with the pid
        seen = []
        path = os.environ["NETGUARD_LOG"]
        if os.path.exists(path):
            with open(path) as handle:
                seen += handle.read().splitlines()
            os.unlink(path)
        return seen
    return take


def test_a_connection_to_a_public_address_is_refused_and_reported(guard_report):
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("93.184.216.34", 80), timeout=1)
    with pytest.raises(OSError):
        socket.socket().connect(("198.51.100.7", 443))
    assert len(guard_report()) == 2


def test_a_name_lookup_of_a_public_host_is_refused_and_reported(guard_report):
    with pytest.raises(httpx.ConnectError):
        httpx.get("https://api.nhtsa.gov/recalls", timeout=2)
    assert any("api.nhtsa.gov" in line for line in guard_report())


def test_loopback_is_allowed(guard_report):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    try:
        socket.create_connection(server.getsockname(), timeout=1).close()
        socket.getaddrinfo("localhost", 80)
    finally:
        server.close()
    assert guard_report() == []


def test_a_child_process_is_guarded_too(guard_report):
    code = "import socket\ntry:\n    socket.create_connection(('203.0.113.5', 80), timeout=1)\nexcept OSError:\n    print('refused')"
    done = subprocess.run([sys.executable, "-c", code], env=subprocess_env(NETGUARD_LOG=os.environ["NETGUARD_LOG"]),
                          capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "refused"
    assert any("203.0.113.5" in line for line in guard_report())


def test_a_child_process_with_its_own_environment_is_guarded_too(guard_report):
    code = "import socket\ntry:\n    socket.getaddrinfo('example.org', 80)\nexcept OSError:\n    print('refused')"
    done = subprocess.run([sys.executable, "-c", code], env={"PATH": os.environ.get("PATH", "")},
                          capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "refused"
    assert any("example.org" in line for line in guard_report())
