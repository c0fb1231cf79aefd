"""scripts/translator (issue 32): sets up LibreTranslate outside the checkout and writes the
backend setting scripts/run reads. Offline: the install steps are shown by --dry-run; the start,
the wait until it translates, the setting and --stop run against an installed-looking home whose
`libretranslate` is the fake server (translate/fakeserver.py)."""
import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "translator"


def _env(tmp_path, **extra):
    return {**os.environ, "HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data"),
            "XDG_CONFIG_HOME": str(tmp_path / "config"), "BASECRAWLER_TRANSLATOR_SYSTEMD": "0",
            "PYTHONPATH": str(REPO), **extra}


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_dry_run_shows_every_step_outside_the_checkout_and_changes_nothing(tmp_path):
    out = subprocess.run(["bash", str(SCRIPT), "--dry-run"], env=_env(tmp_path), capture_output=True, text=True,
                         timeout=60, check=True).stdout
    home = tmp_path / "data" / "basecrawler" / "libretranslate"
    assert f"+ python3 -m venv {home}/venv" in out
    assert f"{home}/venv/bin/pip install -q --disable-pip-version-check libretranslate" in out
    assert "load_only_lang_codes='en,ja,fr,de,ko'" in out
    assert "--host 127.0.0.1 --port 5000 --load-only en,ja,fr,de,ko" in out
    assert f"+ write {tmp_path}/config/basecrawler/translator.env" in out
    assert str(REPO) not in out and not (tmp_path / "data").exists() and not (tmp_path / "config").exists()


def test_it_starts_the_server_waits_until_it_translates_and_writes_the_setting(tmp_path):
    home = tmp_path / "data" / "basecrawler" / "libretranslate"
    (home / "venv" / "bin").mkdir(parents=True)
    (home / "venv" / "bin" / "python").symlink_to(sys.executable)
    fake = home / "venv" / "bin" / "libretranslate"     # as installed; $4 is --port's value
    fake.write_text(f'#!/bin/sh\nexec {sys.executable} -m translate.fakeserver --port "$4"\n')
    fake.chmod(0o755)
    (home / "models-en,ja,fr,de,ko").touch()
    port = _port()
    env = _env(tmp_path, BASECRAWLER_TRANSLATOR_PORT=str(port))
    try:
        done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "pip install" not in done.stdout                       # installed: skipped
        setting = (tmp_path / "config" / "basecrawler" / "translator.env").read_text()
        assert setting == f"BASECRAWLER_TRANSLATE_BACKEND=libretranslate\nBASECRAWLER_LIBRETRANSLATE_URL=http://127.0.0.1:{port}\n"
        request = urllib.request.Request(f"http://127.0.0.1:{port}/translate", json.dumps(
            {"q": "Brake", "source": "en", "target": "ko"}).encode(), {"Content-Type": "application/json"})
        assert json.load(urllib.request.urlopen(request, timeout=5))["translatedText"]
        assert (home / "server.pid").read_text().strip().isdigit()
    finally:
        subprocess.run(["bash", str(SCRIPT), "--stop"], env=env, capture_output=True, timeout=30)
    assert not (home / "server.pid").exists()


def test_scripts_run_reads_the_setting_and_offers_the_translator_when_none():
    text = (REPO / "scripts" / "run").read_text()
    assert 'basecrawler/translator.env' in text and '. "$translator_env"' in text
    assert "scripts/translator sets up a free local one" in text
