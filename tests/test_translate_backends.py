"""Backends: request shapes (through httpx.MockTransport), error classes, configuration."""
import json

import httpx
import pytest

from basecrawler.errors import ConfigError
from translate.backends import DeepLBackend, LibreTranslateBackend, OpenAIChatBackend, backend_from_env
from translate.errors import BackendItemError, BackendUnavailable


def recording(answer, status=200):
    requests = []

    def handler(request):
        requests.append(request)
        return httpx.Response(status, json=answer) if not isinstance(answer, str) else httpx.Response(status, text=answer)
    return httpx.MockTransport(handler), requests


def test_deepl_free_key_uses_the_free_host_with_auth_header_text_list_and_target_ko():
    transport, requests = recording({"translations": [{"detected_source_language": "JA", "text": "에어백"}]})
    backend = DeepLBackend("abc-123:fx", transport=transport)
    assert backend.translate(["エアバッグ"], "ja") == ["에어백"]
    request = requests[0]
    assert str(request.url) == "https://api-free.deepl.com/v2/translate"
    assert request.headers["authorization"] == "DeepL-Auth-Key abc-123:fx"
    assert json.loads(request.content) == {"text": ["エアバッグ"], "source_lang": "JA", "target_lang": "KO"}


def test_deepl_paid_key_uses_the_paid_host():
    transport, requests = recording({"translations": [{"text": "가"}]})
    DeepLBackend("paid-key", transport=transport).translate(["a"], "en")
    assert requests[0].url.host == "api.deepl.com"


def test_deepl_456_quota_exceeded_stops_with_reason_quota():
    transport, _ = recording({"message": "Quota exceeded"}, status=456)
    with pytest.raises(BackendUnavailable) as caught:
        DeepLBackend("k:fx", transport=transport, retry_waits_s=()).translate(["a"], "en")
    assert caught.value.reason == "quota"


def test_openai_chat_sends_model_fixed_prompt_and_text_and_returns_only_the_content():
    transport, requests = recording({"choices": [{"message": {"role": "assistant", "content": " 에어백이 터질 수 있습니다.\n"}}]})
    backend = OpenAIChatBackend("http://127.0.0.1:8080/v1", "local-model", api_key="sk-x", transport=transport)
    assert backend.translate(["The airbag may burst."], "en") == ["에어백이 터질 수 있습니다."]
    request = requests[0]
    body = json.loads(request.content)
    assert str(request.url) == "http://127.0.0.1:8080/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-x"
    assert body["model"] == "local-model" and body["temperature"] == 0
    assert "from English into Korean" in body["messages"][0]["content"]
    assert "translation only" in body["messages"][0]["content"]
    assert body["messages"][1] == {"role": "user", "content": "The airbag may burst."}


def test_wrong_number_of_translations_is_an_item_error():
    transport, _ = recording({"translatedText": ["only one"]})
    with pytest.raises(BackendItemError):
        LibreTranslateBackend("http://lt.example", transport=transport).translate(["a", "b"], "en")


def test_html_page_instead_of_json_stops_the_run():
    transport, _ = recording("<html>proxy login</html>")
    with pytest.raises(BackendUnavailable) as caught:
        LibreTranslateBackend("http://lt.example", transport=transport, retry_waits_s=()).translate(["a"], "en")
    assert caught.value.reason == "unexpected"


def test_server_error_is_retried_before_giving_up():
    answers = iter([httpx.Response(503), httpx.Response(200, json={"translatedText": ["가"]})])
    transport = httpx.MockTransport(lambda request: next(answers))
    backend = LibreTranslateBackend("http://lt.example", transport=transport, retry_waits_s=(0,))
    assert backend.translate(["a"], "en") == ["가"] and backend.calls == 2


def test_deepl_key_is_redacted_from_a_rejection_message():
    transport, _ = recording({"message": "Wrong key secret-deepl-key:fx"}, status=403)
    with pytest.raises(BackendUnavailable) as caught:
        DeepLBackend("secret-deepl-key:fx", transport=transport).translate(["a"], "en")
    assert "secret-deepl-key" not in str(caught.value) and caught.value.reason == "credentials"


def test_no_backend_variable_means_no_backend():
    assert backend_from_env({}) is None


@pytest.mark.parametrize("environ, missing", [
    ({"BASECRAWLER_TRANSLATE_BACKEND": "libretranslate"}, "BASECRAWLER_LIBRETRANSLATE_URL"),
    ({"BASECRAWLER_TRANSLATE_BACKEND": "deepl"}, "BASECRAWLER_DEEPL_API_KEY"),
    ({"BASECRAWLER_TRANSLATE_BACKEND": "openai"}, "BASECRAWLER_OPENAI_MODEL"),
    ({"BASECRAWLER_TRANSLATE_BACKEND": "babelfish"}, "libretranslate, deepl or openai"),
])
def test_incomplete_backend_configuration_names_what_is_missing(environ, missing):
    with pytest.raises(ConfigError, match=missing):
        backend_from_env(environ)


def test_backends_are_built_from_their_variables():
    lt = backend_from_env({"BASECRAWLER_TRANSLATE_BACKEND": "libretranslate",
                           "BASECRAWLER_LIBRETRANSLATE_URL": "http://127.0.0.1:5000", "BASECRAWLER_LIBRETRANSLATE_API_KEY": "k"})
    deepl = backend_from_env({"BASECRAWLER_TRANSLATE_BACKEND": "DeepL", "BASECRAWLER_DEEPL_API_KEY": "k:fx"})
    chat = backend_from_env({"BASECRAWLER_TRANSLATE_BACKEND": "openai", "BASECRAWLER_OPENAI_BASE_URL": "http://127.0.0.1:8080/v1",
                             "BASECRAWLER_OPENAI_MODEL": "qwen"})
    assert (lt.name, lt.base_url, lt.api_key) == ("libretranslate", "http://127.0.0.1:5000", "k")
    assert (deepl.name, deepl.base_url) == ("deepl", "https://api-free.deepl.com")
    assert (chat.name, chat.model, chat.base_url) == ("openai", "qwen", "http://127.0.0.1:8080/v1")


def test_chat_answer_wrapped_in_quotes_is_unwrapped():
    transport, _ = recording({"choices": [{"message": {"content": "“에어백이 터질 수 있습니다.”"}}]})
    backend = OpenAIChatBackend("http://127.0.0.1:8080/v1", "m", transport=transport)
    assert backend.translate(["The airbag may burst."], "en") == ["에어백이 터질 수 있습니다."]
