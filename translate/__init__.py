"""The translation worker: fills the `_ko` columns of stored records of every type, resumably.

- `translate.worker`    translate_pending(store, backend, ...) -> TranslationReport
- `translate.targets`   what to translate, read from the record-type declarations
- `translate.claims`    which worker holds which row: claims with a lease, taken back from the dead
- `translate.sending`   backend requests on daemon threads, abandoned at once on a stop
- `translate.backends`  LibreTranslate, DeepL, OpenAI-compatible chat; backend_from_env()
- `translate.memory`    translation memory (each normalised string translated once)
- `translate.glossary`  fixed Korean terms and do-not-translate names (CSV)
- `translate.protect`   ⟦n⟧ placeholders for codes, names and glossary terms
- `translate.guards`    checks that block suspected mistranslations
- `translate.fakeserver` a LibreTranslate-compatible fake for tests and the benchmark

Run it with `python -m basecrawler translate` or `python -m translate`.
"""
import importlib

# Imported when first used: the store's `basecrawler.schema` entry point imports this package on
# every run, which has no use for the worker and its backends (36 ms).
_LAZY = {"Backend": ".backends", "backend_from_env": ".backends",
         "TranslationReport": ".worker", "translate_pending": ".worker"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Backend", "backend_from_env", "TranslationReport", "translate_pending"]
