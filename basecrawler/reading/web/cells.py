"""How the web view writes a record's cells (no Datasette hooks here: the plugins call these,
basecrawler/reading/web/plugins/basecrawler_cards.py): a link only for an http(s) URL, the
best text Korean first with the original beside it, a multi-valued field as its words, the
undated records' marker."""
from __future__ import annotations

import json
import urllib.parse

import markupsafe

from basecrawler import i18n
from basecrawler.i18n import gettext as _
from basecrawler.reading.browse import http_url
from basecrawler.recordtypes.declaration import as_read


def _short_url(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc or url


def link_or_text(value):
    """An http(s) URL as a short link; any other value (javascript:, data: …) as plain text."""
    url = http_url(value)
    if url is None:
        return markupsafe.Markup('<span class="bc-not-a-link">{}</span>').format(value)
    # The host may break after each dot (<wbr>): a long one wraps in its narrow column.
    host = markupsafe.Markup(".<wbr>").join(_short_url(url).split("."))
    return markupsafe.Markup('<a class="bc-source" href="{}" rel="noopener noreferrer">{} ↗</a>').format(url, host)


def best_text_html(record_type, row: dict):
    lang = row.get("source_lang") or ""
    korean, original = record_type.best_text(row)   # (read as a reader is shown a pair: as_read)
    base = next((b for b in record_type.display if row.get(f"{b}_original") or row.get(f"{b}_ko")), None)
    parts = []
    if base is not None and base != record_type.display[0]:
        # The first choice is empty: say which field is shown (e.g. a JP recall's cause).
        parts.append(markupsafe.Markup('<span class="bc-field-name">{}</span>').format(_(record_type.label(f"{base}_original"))))
    if korean or original:
        parts.append(korean_first(korean, original, lang, block=True))
    return markupsafe.Markup("").join(parts)


def korean_first(korean, original, lang: str, *, block: bool = False):
    """A translated field as a cell: the Korean, the original one line below; untranslated,
    the original with a small "awaiting translation" mark (never an empty Korean column).
    The pair is read as everywhere (recordtypes.declaration.as_read)."""
    korean, original = as_read(korean, original, lang)
    tag = "div" if block else "span"
    if korean:
        shown = markupsafe.Markup('<{0} class="bc-ko" lang="ko">{1}</{0}>').format(tag, korean)
        if original:
            shown += markupsafe.Markup('<{0} class="bc-original" lang="{1}">{2}</{0}>').format(tag, lang, original)
        return shown
    if not original:
        return None
    return markupsafe.Markup('<{0} class="bc-original bc-untranslated" lang="{1}"><span class="bc-pending">{2}</span> {3}</{0}>'
                             ).format(tag, lang, _("awaiting translation"), original)


def listed(value) -> str | None:
    """A multi-valued field's JSON list as the words it holds ("Food, Children")."""
    try:
        items = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return None
    return ", ".join(str(item) for item in items) if isinstance(items, list) else None


def readable(column: str, value):
    """A stored value as the reader reads it, where its column says more than the value does:
    a country by its name in the reader's language, the code beside it ("캐나다 (CA)"). The one
    rule for cells, facets, cards and the count line; everything else as it is."""
    return i18n.country(value) if column == "country" and value not in (None, "") else value


def unknown_date(record_type, value) -> bool:
    """A date cell that holds no real date: empty, or the type's sentinel (1970-01-01)."""
    sentinel = record_type.date_sentinel.isoformat() if record_type.date_sentinel else None
    return value in (None, "") or (sentinel is not None and str(value).startswith(sentinel))
