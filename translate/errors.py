"""The exceptions of the translation worker and what each one makes the worker do.

    ConfigError (basecrawler)
    └── NoBackendConfigured      no backend chosen: say how to configure one, exit 2
    TranslationError
    ├── BackendUnavailable       down, rate-limited, out of quota, key rejected, nonsense
    │                            answers: stop the run, leave the rows pending
    └── BackendItemError         the backend refused or mangled this request's text only:
                                 the texts are retried one by one, a text failing alone
                                 marks its row `failed`

Messages never contain an API key: backends build them from the status code and host, and
pass any echoed response text through `redact()`.
"""
from __future__ import annotations

from basecrawler.errors import ConfigError


class NoBackendConfigured(ConfigError):
    """No translation backend is configured (see translate.backends for the variables)."""


class TranslationError(Exception):
    """Root of the worker's backend failures."""


class BackendUnavailable(TranslationError):
    """The backend cannot translate anything right now; `reason` is down / rate_limited /
    quota / credentials / unexpected."""

    def __init__(self, message: str, *, reason: str = "down"):
        self.reason = reason
        super().__init__(message)


class BackendItemError(TranslationError):
    """The backend failed on the texts of one request, not as a whole."""


def redact(text: str, secrets) -> str:
    """`text` with every non-empty secret replaced by ***."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text
