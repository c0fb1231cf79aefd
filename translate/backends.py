"""Translation backends behind one small interface, chosen by environment variables.

    BASECRAWLER_TRANSLATE_BACKEND   libretranslate | deepl | openai   (unset: no backend)
    BASECRAWLER_TRANSLATE_TIMEOUT   seconds per request (default 60)
    BASECRAWLER_TRANSLATE_CONCURRENCY  requests in flight at once (default per backend: 4, 2, 4)

    libretranslate (a self-hosted server, POST /translate)
      BASECRAWLER_LIBRETRANSLATE_URL      e.g. http://127.0.0.1:5000 (required)
      BASECRAWLER_LIBRETRANSLATE_API_KEY  only if the server asks for one
    deepl (DeepL API v2, POST /v2/translate)
      BASECRAWLER_DEEPL_API_KEY           required; a key ending in ":fx" uses api-free.deepl.com
      BASECRAWLER_DEEPL_URL               optional host override (a proxy or a test server)
    openai (any OpenAI-compatible chat-completions endpoint, local LLM servers included)
      BASECRAWLER_OPENAI_BASE_URL         default https://api.openai.com/v1
      BASECRAWLER_OPENAI_MODEL            required, e.g. gpt-4o-mini or qwen2.5:7b-instruct
      BASECRAWLER_OPENAI_API_KEY          required for api.openai.com, optional elsewhere

A backend has `name`, `max_texts` (texts per request) and
`translate(texts, source_lang, target_lang) -> list[str]`, one answer per text in order. It
raises BackendUnavailable when nothing can be translated now and BackendItemError when only
this request's texts are the problem (see translate.errors). Keys never reach a message.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import Mapping
from urllib.parse import urlsplit

import httpx

from basecrawler.config import DEFAULT_USER_AGENT

from . import markup
from .errors import BackendItemError, BackendUnavailable, ConfigError, redact

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 60.0
RETRY_WAITS_S = (1.0, 4.0)   # a blip in a local server should not stop a long run

CONFIGURE_HELP = """\
No translation backend is configured. Set BASECRAWLER_TRANSLATE_BACKEND and its settings:
  libretranslate: BASECRAWLER_LIBRETRANSLATE_URL=http://127.0.0.1:5000 [BASECRAWLER_LIBRETRANSLATE_API_KEY=...]
  deepl:          BASECRAWLER_DEEPL_API_KEY=...   (keys ending in :fx use the free API host)
  openai:         BASECRAWLER_OPENAI_MODEL=... [BASECRAWLER_OPENAI_BASE_URL=http://127.0.0.1:8080/v1] [BASECRAWLER_OPENAI_API_KEY=...]
Rows stay pending until a backend is configured."""


class Backend:
    """The interface the worker uses; subclasses implement `translate`."""

    name = "backend"
    max_texts = 25          # texts per request
    max_chars = 20_000      # characters per request
    concurrency = 1         # requests the worker may have in flight at once

    def __init__(self) -> None:
        self.calls = 0      # requests made, for reports and the benchmark
        self._calls_lock = threading.Lock()

    def count_call(self) -> None:
        with self._calls_lock:
            self.calls += 1

    def translate(self, texts: list[str], source_lang: str, target_lang: str = "ko") -> list[str]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    # ---- `doctor`: checked the way `translate` uses it ------------------------------------
    PROBE_TEXT = "Brake hose"

    def probe(self) -> str:
        """Translate one short text through `translate()` (the worker's own request path), so
        a backend that translates is never reported broken. Returns a line saying so; raises
        what `translate()` raises."""
        started = time.monotonic()
        answer = self.translate([self.PROBE_TEXT], "en", "ko")[0]
        return f"{self.where()} translated a test text in {(time.monotonic() - started) * 1000:.0f} ms ({answer[:30]!r})"

    def where(self) -> str:
        return self.name

    def fix_for(self, error: Exception) -> str:
        """What to do about `error` from `probe()`, naming this backend and its settings."""
        reason = getattr(error, "reason", None)
        if reason == "credentials":
            return f"check the API key of {self.name} (BASECRAWLER_{self.name.upper()}_API_KEY)"
        if reason == "quota":
            return f"{self.name}'s quota is used up: wait for it to renew or configure another backend"
        if reason == "rate_limited":
            return f"{self.name} is rate-limiting: run `basecrawler translate` later or lower BASECRAWLER_TRANSLATE_CONCURRENCY"
        if reason is None:   # BackendItemError: it answered, but not with a translation
            return f"{self.name} answered without a usable translation: check its logs and model"
        return self.start_hint()

    def start_hint(self) -> str:
        return f"start {self.name} or configure another backend (README, Translate)"


class HttpBackend(Backend):
    """Shared HTTP plumbing: one httpx client, timeouts, a short retry on blips, and the
    status → outcome table. `secrets` are redacted from anything that reaches a message."""

    def __init__(self, base_url: str, *, secrets=(), transport: httpx.BaseTransport | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, retry_waits_s=None):
        super().__init__()
        self.base_url = base_url.rstrip("/")
        self.host = urlsplit(self.base_url).netloc or self.base_url
        self._secrets = tuple(s for s in secrets if s)
        self.retry_waits_s = tuple(RETRY_WAITS_S if retry_waits_s is None else retry_waits_s)
        self.client = httpx.Client(transport=transport, timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s)),
                                   headers={"User-Agent": DEFAULT_USER_AGENT})

    def close(self) -> None:
        self.client.close()

    def where(self) -> str:
        return f"{self.name} at {self.base_url}"

    def _redact(self, text: str) -> str:
        return redact(text, self._secrets)

    def post_json(self, path: str, payload: dict, headers: dict | None = None):
        """POST `payload` as JSON; the decoded answer, or a classified error."""
        url = self.base_url + path
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        limit = markup.max_answer_bytes(len(body))
        headers = {"Content-Type": "application/json", **(headers or {})}
        for attempt in range(len(self.retry_waits_s) + 1):
            final = attempt == len(self.retry_waits_s)
            self.count_call()
            try:
                response = self._post_bounded(url, body, headers, limit)
            except httpx.TimeoutException:
                problem = f"{self.name} at {self.host} timed out"
            except httpx.TransportError as exc:
                problem = f"{self.name} at {self.host} is unreachable ({type(exc).__name__})"
            else:
                status = response.status_code
                if status < 300:
                    try:
                        return json.loads(response.content)
                    except (ValueError, RecursionError):   # not JSON, or nested past what it can read
                        raise BackendUnavailable(
                            f"{self.name} at {self.host} answered HTTP {status} without JSON "
                            f"({self._snippet(response)})", reason="unexpected") from None
                if status == 429:
                    raise BackendUnavailable(f"{self.name} at {self.host} is rate-limiting (HTTP 429)", reason="rate_limited")
                if status == 456 or (status == 403 and "quota" in response.text.lower()):
                    raise BackendUnavailable(f"{self.name} at {self.host}: quota exhausted (HTTP {status})", reason="quota")
                if status in (401, 403):
                    raise BackendUnavailable(
                        f"{self.name} at {self.host} rejected the credentials (HTTP {status}: {self._snippet(response)})",
                        reason="credentials")
                if status in (400, 413, 422):
                    raise BackendItemError(f"{self.name} refused the request (HTTP {status}: {self._snippet(response)})")
                problem = f"{self.name} at {self.host} failed (HTTP {status}: {self._snippet(response)})"
            if final:
                raise BackendUnavailable(problem, reason="down")
            wait = self.retry_waits_s[attempt]
            log.warning("%s; retry %d/%d in %.1fs", problem, attempt + 1, len(self.retry_waits_s), wait)
            time.sleep(wait)
        raise AssertionError("unreachable")

    def _post_bounded(self, url: str, body: bytes, headers: dict, limit: int) -> "_Answer":
        """POST `body`, reading at most `limit` bytes of the answer (decoded, so a compressed
        bomb counts what it inflates to): a backend that answers more is refused as this
        request's problem (BackendItemError) with the memory of the worker unchanged."""
        with self.client.stream("POST", url, content=body, headers=headers) as response:
            declared = response.headers.get("Content-Length")
            if declared and declared.isdigit() and int(declared) > limit and response.status_code < 300:
                raise BackendItemError(f"{self.name} answered {int(declared)} bytes, more than the {limit} "
                                       "a translation of this request may take")
            chunks, size = [], 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > limit and response.status_code >= 300:
                    break   # an error page: its opening is all a message shows
                if size > limit:
                    raise BackendItemError(f"{self.name} answered more than the {limit} bytes a translation "
                                           "of this request may take")
                chunks.append(chunk)
            return _Answer(response.status_code, b"".join(chunks), response.charset_encoding or "utf-8")

    def _snippet(self, response: "_Answer") -> str:
        text = " ".join(response.text.split())[:200]
        return self._redact(text) or "empty body"


class _Answer:
    """A backend's answer, read whole within its bound."""

    def __init__(self, status_code: int, content: bytes, encoding: str):
        self.status_code = status_code
        self.content = content
        self.encoding = encoding

    @property
    def text(self) -> str:
        try:
            return self.content.decode(self.encoding, errors="replace")
        except LookupError:   # a charset the server made up
            return self.content.decode("utf-8", errors="replace")


class LibreTranslateBackend(HttpBackend):
    """A LibreTranslate server: POST /translate with `q` as a list."""

    name = "libretranslate"
    max_texts = 25
    concurrency = 4         # LibreTranslate's default --threads

    def __init__(self, url: str, api_key: str | None = None, **kw):
        super().__init__(url, secrets=(api_key,), **kw)
        self.api_key = api_key

    def translate(self, texts, source_lang, target_lang="ko"):
        payload = {"q": list(texts), "source": source_lang or "auto", "target": target_lang, "format": "text"}
        if self.api_key:
            payload["api_key"] = self.api_key
        answer = self.post_json("/translate", payload)
        translated = answer.get("translatedText") if isinstance(answer, dict) else None
        if isinstance(translated, str) and len(texts) == 1:
            translated = [translated]
        return _checked(self.name, texts, translated)

    def start_hint(self) -> str:
        return (f"start LibreTranslate at {self.base_url} (README, Translate: docker run -d -p 5000:5000 "
                f"libretranslate/libretranslate --load-only en,ja,fr,de,ko) or correct BASECRAWLER_LIBRETRANSLATE_URL")


class DeepLBackend(HttpBackend):
    """DeepL API v2. Free keys (ending ':fx') must use the free host."""

    name = "deepl"
    max_texts = 50          # DeepL's limit per request
    max_chars = 100_000
    concurrency = 2

    def __init__(self, api_key: str, url: str | None = None, **kw):
        host = url or ("https://api-free.deepl.com" if api_key.endswith(":fx") else "https://api.deepl.com")
        super().__init__(host, secrets=(api_key,), **kw)
        self._auth = {"Authorization": f"DeepL-Auth-Key {api_key}"}

    def translate(self, texts, source_lang, target_lang="ko"):
        payload = {"text": list(texts), "target_lang": target_lang.upper()}
        if source_lang and source_lang != "auto":
            payload["source_lang"] = source_lang.split("-")[0].upper()
        answer = self.post_json("/v2/translate", payload, headers=self._auth)
        items = answer.get("translations") if isinstance(answer, dict) else None
        translated = [item.get("text") if isinstance(item, dict) else None for item in items] if isinstance(items, list) else None
        return _checked(self.name, texts, translated)

    def start_hint(self) -> str:
        return f"{self.base_url} did not answer: check the network or proxy, or set BASECRAWLER_DEEPL_URL"


LANGUAGE_NAMES = {"en": "English", "ja": "Japanese", "fr": "French", "de": "German", "ko": "Korean",
                  "zh": "Chinese", "es": "Spanish", "it": "Italian", "nl": "Dutch"}

CHAT_PROMPT = (
    "You translate vehicle safety recall notices from {source} into {target}. "
    "Reply with the translation only: no notes, no quotes, no explanations. "
    "Keep every number, date, model code, part number and VIN exactly as written. "
    "Keep markers like ⟦0⟧ exactly as they are, in the right place."
)


class OpenAIChatBackend(HttpBackend):
    """An OpenAI-compatible /chat/completions endpoint; one text per request, fixed prompt."""

    name = "openai"
    max_texts = 1
    concurrency = 4         # one text per request: parallel requests hide the latency

    def __init__(self, base_url: str, model: str, api_key: str | None = None, **kw):
        super().__init__(base_url, secrets=(api_key,), **kw)
        self.model = model
        self._auth = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def translate(self, texts, source_lang, target_lang="ko"):
        source = LANGUAGE_NAMES.get((source_lang or "").lower(), "the source language")
        target = LANGUAGE_NAMES.get(target_lang.lower(), target_lang)
        results = []
        for text in texts:
            payload = {
                "model": self.model,
                "temperature": 0,
                "messages": [
                    {"role": "system", "content": CHAT_PROMPT.format(source=source, target=target)},
                    {"role": "user", "content": text},
                ],
            }
            answer = self.post_json("/chat/completions", payload, headers=self._auth)
            try:
                content = answer["choices"][0]["message"]["content"]
            except (KeyError, IndexError, TypeError):
                raise BackendItemError(f"{self.name} answered without choices[0].message.content") from None
            results.append(_unquoted(content.strip()) if isinstance(content, str) else None)
        return _checked(self.name, texts, results)

    def where(self) -> str:
        return f"{self.name} at {self.base_url} (model {self.model})"

    def fix_for(self, error: Exception) -> str:
        # Ollama and llama.cpp answer 404 naming the model when it has not been pulled.
        if "HTTP 404" in str(error) and "model" in str(error).lower():
            return (f"the server at {self.base_url} has no model {self.model}: ollama pull {self.model} "
                    "(or set BASECRAWLER_OPENAI_MODEL to a model it serves)")
        return super().fix_for(error)

    def start_hint(self) -> str:
        return (f"start the OpenAI-compatible server at {self.base_url} (README, Translate: ollama serve, then "
                f"ollama pull {self.model}) or correct BASECRAWLER_OPENAI_BASE_URL")


_QUOTE_PAIRS = {'"': '"', "“": "”", "「": "」", "'": "'"}


def _unquoted(text: str) -> str:
    """Chat models sometimes wrap the whole answer in quotes despite the prompt."""
    if len(text) >= 2 and _QUOTE_PAIRS.get(text[0]) == text[-1] and text[0] not in text[1:-1]:
        return text[1:-1].strip()
    return text


def _checked(name: str, texts: list[str], translated) -> list[str]:
    if not isinstance(translated, list) or len(translated) != len(texts):
        got = len(translated) if isinstance(translated, list) else type(translated).__name__
        raise BackendItemError(f"{name} returned {got} translations for {len(texts)} texts")
    if not all(isinstance(t, str) and t.strip() for t in translated):
        raise BackendItemError(f"{name} returned an empty translation")
    return translated


def backend_from_env(environ: Mapping[str, str] = os.environ, *, transport: httpx.BaseTransport | None = None,
                     retry_waits_s=None) -> Backend | None:
    """The backend the environment configures, or None when none is; ConfigError when the
    choice is incomplete (a key or URL missing)."""
    def get(name: str) -> str | None:
        value = environ.get(name)
        return value.strip() if value and value.strip() else None

    choice = (get("BASECRAWLER_TRANSLATE_BACKEND") or "").lower()
    timeout = float(get("BASECRAWLER_TRANSLATE_TIMEOUT") or DEFAULT_TIMEOUT_S)
    common = {"transport": transport, "timeout_s": timeout, "retry_waits_s": retry_waits_s}
    if not choice:
        return None
    backend = _build(choice, get, common)
    concurrency = get("BASECRAWLER_TRANSLATE_CONCURRENCY")
    if concurrency:
        backend.concurrency = max(1, int(concurrency))
    return backend


def _build(choice: str, get, common: dict) -> Backend:
    if choice == "libretranslate":
        url = get("BASECRAWLER_LIBRETRANSLATE_URL")
        if not url:
            raise ConfigError("BASECRAWLER_TRANSLATE_BACKEND=libretranslate needs BASECRAWLER_LIBRETRANSLATE_URL")
        return LibreTranslateBackend(url, get("BASECRAWLER_LIBRETRANSLATE_API_KEY"), **common)
    if choice == "deepl":
        key = get("BASECRAWLER_DEEPL_API_KEY")
        if not key:
            raise ConfigError("BASECRAWLER_TRANSLATE_BACKEND=deepl needs BASECRAWLER_DEEPL_API_KEY")
        return DeepLBackend(key, get("BASECRAWLER_DEEPL_URL"), **common)
    if choice == "openai":
        base = get("BASECRAWLER_OPENAI_BASE_URL") or "https://api.openai.com/v1"
        model = get("BASECRAWLER_OPENAI_MODEL")
        key = get("BASECRAWLER_OPENAI_API_KEY")
        if not model:
            raise ConfigError("BASECRAWLER_TRANSLATE_BACKEND=openai needs BASECRAWLER_OPENAI_MODEL")
        if "api.openai.com" in base and not key:
            raise ConfigError("api.openai.com needs BASECRAWLER_OPENAI_API_KEY")
        return OpenAIChatBackend(base, model, key, **common)
    raise ConfigError(f"unknown BASECRAWLER_TRANSLATE_BACKEND={choice!r}; use libretranslate, deepl or openai")


__all__ = ["Backend", "HttpBackend", "LibreTranslateBackend", "DeepLBackend", "OpenAIChatBackend",
           "backend_from_env", "CONFIGURE_HELP"]
