"""The exceptions of the translation worker and what each one makes the worker do.

They are part of the project's one tree (drawn in basecrawler/errors.py), each with a `.kind`:

    ConfigError (basecrawler)
    └── NoBackendConfigured (no_backend)       no backend chosen: say how to configure one, exit 2
    CrawlerError (basecrawler)
    └── TranslationError (translation)
        ├── BackendUnavailable (backend_unavailable)   down, rate-limited, out of quota, key
        │   │                                          rejected, nonsense answers: stop the run,
        │   │                                          leave the rows pending
        │   ├── BackendDown (backend_down)
        │   ├── BackendRateLimited (backend_rate_limited)
        │   ├── BackendQuotaExhausted (backend_quota)
        │   ├── BackendCredentialsRejected (backend_credentials)
        │   └── BackendUnexpected (backend_unexpected)
        └── BackendItemError (backend_item)    the backend refused or mangled this request's text
                                               only: the texts are retried one by one, a text
                                               failing alone marks its row `failed`

`BackendUnavailable(message, reason="quota")` still works and gives the matching subclass;
`.reason` ("down", "rate_limited", "quota", "credentials", "unexpected") is `.kind` without its
`backend_` prefix, kept for callers written before the tree.

Messages never contain an API key: backends build them from the status code and host, and
pass any echoed response text through `redact()`.
"""
from __future__ import annotations

from basecrawler.errors import ConfigError, CrawlerError


class NoBackendConfigured(ConfigError):
    """No translation backend is configured (see translate.backends for the variables)."""

    kind = "no_backend"


class TranslationError(CrawlerError):
    """Root of the worker's backend failures."""

    kind = "translation"


class BackendUnavailable(TranslationError):
    """The backend cannot translate anything right now; the subclass (and `.reason`) says why."""

    kind = "backend_unavailable"

    def __new__(cls, message: str = "", *, reason: str = "down"):
        if cls is BackendUnavailable:
            try:
                cls = next(sub for sub in cls.__subclasses__() if sub.kind == f"backend_{reason}")
            except StopIteration:
                raise ValueError(f"unknown BackendUnavailable reason {reason!r}") from None
        return super().__new__(cls, message)

    def __init__(self, message: str = "", *, reason: str | None = None):
        super().__init__(message)

    @property
    def reason(self) -> str:
        return self.kind.removeprefix("backend_")


class BackendDown(BackendUnavailable):
    kind = "backend_down"


class BackendRateLimited(BackendUnavailable):
    kind = "backend_rate_limited"


class BackendQuotaExhausted(BackendUnavailable):
    kind = "backend_quota"


class BackendCredentialsRejected(BackendUnavailable):
    kind = "backend_credentials"


class BackendUnexpected(BackendUnavailable):
    kind = "backend_unexpected"


class BackendItemError(TranslationError):
    """The backend failed on the texts of one request, not as a whole."""

    kind = "backend_item"


def redact(text: str, secrets) -> str:
    """`text` with every non-empty secret replaced by ***."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text
