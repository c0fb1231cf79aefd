"""Offline and unreachable hosts (issue 14.4): name-resolution and connection-refused failures
end a source after one quick retry, not the back-off ladder; when every source was unreachable
the last line suggests the offline replay."""
import os
import shlex
import socket
import sys
import time

import httpx
import pytest

from basecrawler import BaseCrawler
from basecrawler.cli import main
from basecrawler.commands import run as run_command
from basecrawler.errors import Transient
from basecrawler.fetch.http import HttpClient
from basecrawler.fetch.replay import DEFAULT_REPLAY_DIR, offline_hint
from basecrawler.testing import fast_settings


def _closed_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()               # nothing listens there now: connecting is refused
    return port


def _client(settings, **kw):
    waits = []
    return HttpClient(settings=settings, sleep=waits.append, **kw), waits


def test_connection_refused_is_retried_once_then_gives_up(db_path):
    settings = fast_settings(db_path, max_retries=4, backoff_base_s=30.0, backoff_cap_s=60.0, rate_per_s=0.0)
    client, waits = _client(settings)
    url = f"http://127.0.0.1:{_closed_port()}/list"
    with pytest.raises(Transient, match="host unreachable after 1 retry"):
        client.get(url)
    assert client.stats()["requests"] == 2 and client.stats()["gave_up/unreachable"] == 1
    assert len(waits) == 1 and waits[0] <= 1.0          # not a 30-60 s back-off step


def test_failed_name_resolution_is_retried_once_then_gives_up(db_path):
    def no_dns(request):
        try:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        except socket.gaierror as exc:
            raise httpx.ConnectError("[Errno -2] Name or service not known", request=request) from exc

    settings = fast_settings(db_path, max_retries=4, backoff_base_s=30.0, backoff_cap_s=60.0, rate_per_s=0.0)
    client, waits = _client(settings, transport=httpx.MockTransport(no_dns))
    with pytest.raises(Transient, match="host unreachable"):
        client.get("https://recalls.example/list")
    assert client.stats()["requests"] == 2 and len(waits) == 1 and waits[0] <= 1.0


def test_a_timeout_still_gets_the_full_retry_ladder(db_path):
    def slow(request):
        raise httpx.ReadTimeout("timed out", request=request)

    client, waits = _client(fast_settings(db_path, max_retries=4, rate_per_s=0.0), transport=httpx.MockTransport(slow))
    with pytest.raises(Transient, match="gave up after 4 retries"):
        client.get("https://recalls.example/list")
    assert client.stats()["requests"] == 5


class Unreachable(BaseCrawler):
    source = "un"
    country = "UN"
    endpoints = {"site": "http://127.0.0.1:1"}     # the fixtures point it at a closed port

    def fetch(self):
        yield self.http.get_json(self.url("site", "/list"))

    def parse(self, raw):
        return None


class AlsoUnreachable(Unreachable):
    source = "un2"
    country = "U2"


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setattr(Unreachable, "endpoints", {"site": f"http://127.0.0.1:{_closed_port()}"})
    monkeypatch.setattr(run_command, "discover", lambda: {"un": Unreachable, "un2": AlsoUnreachable})


HINT = "every source was unreachable (offline?); to fill the store from the recorded replay set instead, type: "


def test_every_source_unreachable_ends_quickly_and_suggests_the_replay(db_path, offline, capsys):
    started = time.monotonic()
    assert main(["--db", db_path, "run", "--all"]) == 1
    assert time.monotonic() - started < 10            # the default ladder would take ~60 s per source
    last = capsys.readouterr().err.splitlines()[-1]
    command = shlex.split(last.split(HINT, 1)[1])
    # This very Python (the venv's: works without activating it), the same database, full mode;
    # paths relative to the working directory when under it.
    absolute = [os.path.abspath(part) if "/" in part or part.endswith(".db") else part for part in command]
    assert absolute == [os.path.abspath(sys.executable), "-m", "basecrawler", "--db", db_path, "run", "--all",
                        "--mode", "full", "--replay", str(DEFAULT_REPLAY_DIR)]


def test_the_hint_is_relative_under_the_working_directory_and_never_shows_a_database_password(tmp_path):
    hint = offline_hint("basecrawler.db", replay_dir=DEFAULT_REPLAY_DIR, cwd=DEFAULT_REPLAY_DIR.parents[1])
    assert hint.endswith(" run --all --mode full --replay fixtures/replay")
    hint = offline_hint("postgresql://crawler:s3cret@db/recalls", environ={})
    assert "s3cret" not in hint and "--db" not in hint
    assert offline_hint("x.db", environ={"BASECRAWLER_LAUNCHER": "scripts/run"}) == HINT + "scripts/run --replay"
    assert "no replay set here" in offline_hint("x.db", replay_dir=tmp_path / "absent")


def test_no_replay_hint_when_a_source_was_reached(db_path, monkeypatch, capsys):
    class Reached(BaseCrawler):
        source = "ok"
        country = "OK"

        def fetch(self):
            yield {"id": "1"}

        def parse(self, raw):
            return {"recall_number": raw["id"], "recall_date": "2024-01-01"}

    monkeypatch.setattr(Unreachable, "endpoints", {"site": f"http://127.0.0.1:{_closed_port()}"})
    monkeypatch.setattr(run_command, "discover", lambda: {"ok": Reached, "un": Unreachable})
    assert main(["--db", db_path, "run", "--all"]) == 1
    err = capsys.readouterr().err
    assert "un=failed" in err and "--replay" not in err
