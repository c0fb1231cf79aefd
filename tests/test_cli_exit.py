"""Exit codes are declared once, by the error classes (issue #35.5): the command line takes an
exception's code from its class, and the table in `basecrawler.cli`'s docstring names, for
each code, the classes that carry it."""
from __future__ import annotations

import re

import pytest

import basecrawler.cli as cli
import basecrawler.fetch.artifacts  # noqa: F401  (its error classes join the tree)
import basecrawler.formats.pdf  # noqa: F401
import translate.errors  # noqa: F401
from basecrawler import errors
from basecrawler.errors import ConfigError, CrawlerError, Interrupted, UnknownSource, UnusablePath, subclasses


def _table() -> dict[int, list[str]]:
    """{code: [names in its brackets]} read from the docstring's table (a row may wrap)."""
    rows: dict[int, str] = {}
    code = None
    for line in cli.__doc__.splitlines():
        start = re.match(r"^\s{2,}(\d+)\s{2}(.*)$", line)
        if start:
            code = int(start.group(1))
            rows[code] = start.group(2)
        elif code is not None and line.startswith("       "):
            rows[code] += " " + line.strip()
        else:
            code = None
    return {code: re.findall(r"\[([^\]]+)\]", text)[-1].replace(" ", "").split(",") for code, text in rows.items()}


def test_the_docstring_table_names_classes_that_carry_its_codes():
    table = _table()
    assert set(table) == {0, 1, 2, 3, 130}
    for code, names in table.items():
        for name in names:
            declared = errors.EXIT_OK if name == "EXIT_OK" else getattr(errors, name).exit_code
            assert declared == code, (name, code)


def test_every_code_an_error_class_carries_is_in_the_table():
    carried = {cls.exit_code for cls in [CrawlerError, *subclasses(CrawlerError)]
               if cls.__module__.split(".")[0] in ("basecrawler", "translate", "sources")}
    assert carried | {errors.EXIT_OK} == set(_table())


def test_the_help_epilog_states_the_class_codes(monkeypatch):
    monkeypatch.setattr(ConfigError, "exit_code", 42)
    assert "42 usage or configuration" in cli.build_parser().epilog


@pytest.mark.parametrize("raised, expected", [
    (UnknownSource("xx", ["ga"]), 42),       # a subclass inherits ConfigError's code
    (ConfigError("bad"), 42),
    (Interrupted("stop"), Interrupted.exit_code),
    (KeyboardInterrupt(), Interrupted.exit_code),
    (PermissionError(13, "Permission denied", "/nope"), UnusablePath.exit_code),
    (errors.RunLockTimeout("another crawl (pid 1) still held the lock"), UnusablePath.exit_code),
])
def test_the_cli_takes_the_code_from_the_class(monkeypatch, capsys, raised, expected):
    monkeypatch.setattr(ConfigError, "exit_code", 42)

    def fail(**_kw):
        raise raised

    monkeypatch.setattr(cli.Settings, "from_env", fail)
    assert cli.main(["types"]) == expected
    assert capsys.readouterr().err.count("\n") == 1   # one line, no traceback


def test_a_class_of_our_own_reaching_the_cli_is_one_line_with_its_code(monkeypatch, capsys):
    class Odd(CrawlerError):
        kind = "odd_for_test"
        exit_code = 77

    def fail(**_kw):
        raise Odd("something odd")

    monkeypatch.setattr(cli.Settings, "from_env", fail)
    assert cli.main(["types"]) == 77
    assert capsys.readouterr().err == "basecrawler: something odd\n"


def test_a_usage_error_exits_with_configerrors_code(monkeypatch, capsys):
    monkeypatch.setattr(ConfigError, "exit_code", 42)
    with pytest.raises(SystemExit) as info:
        cli.main(["--no-such-option"])
    assert info.value.code == 42


def test_logging_set_up_by_the_cli_follows_stderr_when_it_is_replaced_and_closed(monkeypatch):
    import io
    import logging

    from basecrawler.cli import setup_logging

    saved = logging.getLogger().handlers[:], logging.getLogger().level
    first, second = io.StringIO(), io.StringIO()
    try:
        monkeypatch.setattr("sys.stderr", first)
        setup_logging()
        monkeypatch.setattr("sys.stderr", second)
        first.close()
        logging.getLogger("basecrawler.test").info("after the swap")
    finally:
        logging.getLogger().handlers[:], level = saved
        logging.getLogger().setLevel(level)
    assert "Logging error" not in second.getvalue()
    assert any(line.endswith("INFO    after the swap") for line in second.getvalue().splitlines())
