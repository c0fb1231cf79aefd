"""Secrets of the channels (webhook keys, the SMTP password): from the environment, or from a
file only its owner can read. Never stored in the database, never logged: values are wrapped
so a repr or a traceback's locals show `Secret(***)`."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from basecrawler.errors import ConfigError


class Secret:
    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret(***)"

    __str__ = __repr__


def from_file(path: str) -> Secret:
    file = Path(path)
    try:
        mode = file.stat().st_mode
    except OSError as exc:
        raise ConfigError(f"secret file {path}: {exc.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(f"secret file {path} is readable by others: chmod 600 {path}")
    return Secret(file.read_text(encoding="utf-8").strip())


def lookup(env_name: str | None, file_name: str | None = None) -> Secret | None:
    """The secret named by an environment variable, else `<VAR>_FILE`, else `file_name`."""
    if env_name and os.environ.get(env_name):
        return Secret(os.environ[env_name])
    if env_name and os.environ.get(f"{env_name}_FILE"):
        return from_file(os.environ[f"{env_name}_FILE"])
    if file_name:
        return from_file(file_name)
    return None
