"""A translation backend a newcomer runs on one machine (issue 21.4): an OpenAI-compatible local
server such as Ollama, configured exactly as the README shows, translates through
`basecrawler translate`; `doctor` then checks the same backend the same way and holds."""
import os
import re
from pathlib import Path

from basecrawler.cli import main as cli_main
from basecrawler.commands.doctor import check_translation_backend
from translate.fakeserver import FakeOpenAIChat
from translate.testing import seed, statuses

README = Path(__file__).resolve().parent.parent / "README.md"


def _readme_ollama_settings() -> dict:
    """The variables of the README's Ollama recipe (so the test follows the documentation)."""
    block = re.search(r"# Ollama.*?```", README.read_text(encoding="utf-8"), re.S).group(0)
    return dict(re.findall(r"(BASECRAWLER_[A-Z_]+)=(\S+)", block))


def test_readme_ollama_recipe_translates_and_doctor_agrees(store, db_path, monkeypatch, capsys):
    settings = _readme_ollama_settings()
    assert settings["BASECRAWLER_TRANSLATE_BACKEND"] == "openai"
    assert settings["BASECRAWLER_OPENAI_BASE_URL"] == "http://127.0.0.1:11434/v1"
    seed(store, 3, source="jp", country="JP", lang="ja", summary="ブレーキホースが損傷するおそれがある。番号{i}")
    with FakeOpenAIChat(models=[settings["BASECRAWLER_OPENAI_MODEL"]]) as llm:
        for name, value in settings.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("BASECRAWLER_OPENAI_BASE_URL", llm.base_url)   # the fake's port, not Ollama's
        assert cli_main(["--db", db_path, "translate", "--no-progress"]) == 0
        assert statuses(store) == {"translated": 3}
        assert llm.requests and all(r["model"] == settings["BASECRAWLER_OPENAI_MODEL"] for r in llm.requests)
        check = check_translation_backend(os.environ)     # doctor's backend line
    assert check.ok and not check.note and check.line().startswith(f"✓ translation backend openai: openai at {llm.base_url}")
