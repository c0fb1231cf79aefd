"""The one exception tree (issue #15.5): every error class of the project derives from
CrawlerError and has its own non-empty `.kind`; old `except` clauses keep working."""
from __future__ import annotations

import importlib
import pkgutil

import pytest

import basecrawler
import sources
import translate
from basecrawler.errors import (Blocked, CrawlerError, CredentialsRejected, FetchError, NotFound, RateLimited,
                                RunLockTimeout, SchedulerAlreadyRunning, Transient, UnexpectedContent, UnsafeXml)
from basecrawler.fetch.classify import classify
from translate.errors import BackendQuotaExhausted, BackendUnavailable


def _project_exception_classes() -> list[type]:
    found = []
    for package in (basecrawler, translate, sources):
        for info in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + "."):
            if info.name.endswith(".__main__"):   # importing it runs the command line
                continue
            try:
                module = importlib.import_module(info.name)
            except ImportError:   # an optional extra (datasette…) not installed: it defines no errors
                continue
            for value in vars(module).values():
                if (isinstance(value, type) and issubclass(value, BaseException)
                        and value.__module__.split(".")[0] in ("basecrawler", "translate", "sources")
                        and value not in found):
                    found.append(value)
    return found


def test_every_project_exception_derives_from_the_root_with_its_own_kind():
    classes = _project_exception_classes()
    # The walk really finds the classes spread over the packages, not just errors.py.
    names = {cls.__name__ for cls in classes}
    assert {"RunLockTimeout", "UnsafeXml", "SchedulerAlreadyRunning", "ArtifactError", "OcrUnavailable",
            "BackendUnavailable", "BackendItemError", "NoBackendConfigured", "RateLimited"} <= names
    outside = [cls.__qualname__ for cls in classes if not issubclass(cls, CrawlerError)]
    assert outside == []
    without_own_kind = [cls.__qualname__ for cls in classes if not cls.__dict__.get("kind")]
    assert without_own_kind == []
    kinds = [cls.kind for cls in classes]
    assert sorted(k for k in set(kinds) if kinds.count(k) > 1) == []


def test_old_builtin_bases_still_catch():
    with pytest.raises(TimeoutError):
        raise RunLockTimeout("held")
    with pytest.raises(ValueError):
        raise UnsafeXml("dtd")
    with pytest.raises(RuntimeError):
        raise SchedulerAlreadyRunning("pid 1")


def test_backend_unavailable_reason_gives_the_subclass_and_reason_aliases_kind():
    error = BackendUnavailable("quota exhausted (HTTP 456)", reason="quota")
    assert type(error) is BackendQuotaExhausted
    assert (error.kind, error.reason, str(error)) == ("backend_quota", "quota", "quota exhausted (HTTP 456)")
    assert BackendUnavailable("down").reason == "down"
    with pytest.raises(ValueError):
        BackendUnavailable("x", reason="sleepy")


@pytest.mark.parametrize("status, credentials, expected", [
    (429, False, RateLimited), (403, False, Blocked), (401, False, Blocked), (401, True, CredentialsRejected),
    (404, False, NotFound), (410, True, NotFound), (408, False, Transient), (503, False, Transient),
    (599, False, Transient), (418, False, UnexpectedContent),
])
def test_classify_answers_with_the_kind_of_the_class_declaring_the_status(status, credentials, expected):
    assert classify(status, has_credentials=credentials) == expected.kind


def test_a_status_declared_on_a_class_is_what_classify_uses(monkeypatch):
    # The table is read from the classes: re-declaring 418 on NotFound makes classify say so.
    import basecrawler.fetch.classify as http   # the table lives with classify()
    monkeypatch.setattr(NotFound, "statuses", NotFound.statuses | {418})
    by_kind, by_status = http._classification_table()
    monkeypatch.setattr(http, "_BY_STATUS", by_status)
    assert classify(418) == "not_found"
    assert by_kind["not_found"] is NotFound and issubclass(by_kind["transient"], FetchError)
