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
from .backends import Backend, backend_from_env
from .worker import TranslationReport, translate_pending

__all__ = ["Backend", "backend_from_env", "TranslationReport", "translate_pending"]
