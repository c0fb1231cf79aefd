"""EU Safety Gate: the text of a notification's fields — clean-up of the report's values
(HTML fragments, `null ` prefixes, `Unknown`, `xsi:nil`), the run-together `measures` split into
measures, the `danger` text split into cause, consequence and compliance, and the brand / name a
legacy description quotes. Pure functions of text or one element: no HTTP, no run.
"""
from __future__ import annotations

import datetime as dt
import functools
import re
from typing import Iterator

from lxml import etree

from basecrawler.formats import text as text_rules
from basecrawler.formats.dates import parse_date

XSI_NIL = "{http://www.w3.org/2001/XMLSchema-instance}nil"


@functools.lru_cache(maxsize=256)
def local_name(tag) -> str:
    """`{namespace}name` → `name` (cached: a report repeats the same few dozen tags)."""
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


# ---- text clean-up --------------------------------------------------------------------------
_ABSENT = {"unknown", "null", "n/a", "-"}
_ABSENT_LONGEST = max(map(len, _ABSENT))   # longer text is never a placeholder: no lower() copy of it


def clean_text(value: str | None) -> str | None:
    """Source text → plain text or None: HTML fragments, `null ` prefixes, `Unknown`, blanks."""
    if not value:   # a quarter of the fields: empty CDATA, `<x/>`
        return None
    if value.isascii() and value.isprintable() and "  " not in value and "<" not in value \
            and "&" not in value:
        # Most values: no markup, no entity, nothing to repair, no white space but single
        # spaces — what the general cleaning would return is the stripped text.
        text = value.strip()
    else:
        text = text_rules.clean_text(value, markup=True, squash_space=True)
    # Legacy reports prefix some fields with the literal word "null".
    while text and text[:5].lower() == "null ":
        text = text[5:].lstrip()
    return None if not text or (len(text) <= _ABSENT_LONGEST and text.lower() in _ABSENT) else text


# HTML tags a publisher's editor leaves inside a field that is text: the field stays text.
_TEXT_MARKUP = frozenset(("br", "p", "b", "i", "u", "em", "strong", "span", "sub", "sup", "font", "a", "div"))


def _texts_with_breaks(element: etree._Element) -> Iterator[str]:
    """The element's text pieces in order; a line break (`<br>`, a block's end) is a space."""
    yield element.text or ""
    for child in element:
        if isinstance(child.tag, str):
            yield from _texts_with_breaks(child)
            if local_name(child.tag).lower() in ("br", "p", "div"):
                yield " "
        yield child.tail or ""


def element_value(element: etree._Element) -> str | list[str] | None:
    # values() first: most fields have no attribute, and a namespaced get() costs 3x more.
    if element.values() and element.get(XSI_NIL) == "true":
        return None
    if not len(element):   # a leaf (most fields): its text is all of itertext()
        return clean_text(element.text or "")
    children = [child for child in element if isinstance(child.tag, str)]
    if children and all(local_name(child.tag).lower() in _TEXT_MARKUP for child in children):
        # HTML markup inside a text field (`<caseNumber>1150/09<br/></caseNumber>`): its text,
        # a line break as a space, never a list of the tags' (empty) texts.
        return clean_text("".join(_texts_with_breaks(element)))
    if children:  # e.g. <pictures><picture>…</picture></pictures>
        values = [clean_text("".join(child.itertext()) if len(child) else child.text or "") for child in children]
        return [v for v in values if v] or None
    return clean_text("".join(element.itertext()))


# ---- measures and danger text -----------------------------------------------------------------
_MEASURE_LABEL_RE = re.compile(
    r"(Type of economic operator (?:taking notified measure\(s\)|to whom the measure\(s\) were ordered)"
    r"|Category of measure\(s\)|Date of entry into force):\s*")
_MEASURE_KEYS = {"Category of measure(s)": "measure", "Date of entry into force": "entry_into_force"}


def split_measures(text: str | None) -> list[dict]:
    """The run-together `measures` text → one dict per measure (operator, role, measure, date)."""
    if not text:
        return []
    measures: list[dict] = []
    parts = _MEASURE_LABEL_RE.split(text)
    current: dict | None = None
    for label, value in zip(parts[1::2], parts[2::2]):
        value = value.strip().rstrip(".").strip() or None
        if label.startswith("Type of economic operator"):
            current = {"operator": value, "ordered": "were ordered" in label}
            measures.append(current)
            continue
        if current is None or _MEASURE_KEYS[label] in current:
            current = {"operator": None, "ordered": None}
            measures.append(current)
        current[_MEASURE_KEYS[label]] = value
    if not measures and text.strip():
        measures.append({"operator": None, "ordered": None, "measure": text.strip()})
    for measure in measures:
        raw_date = measure.get("entry_into_force")
        measure["entry_into_force"] = iso_date(raw_date) if raw_date and raw_date.lower() != "unknown" else None
    return measures


@functools.lru_cache(maxsize=4096)
def iso_date(raw: str | None) -> str | None:
    """A published date (DD/MM/YYYY) as ISO, None when unreadable; cached: a report's
    notifications share their report date and most of their measures' dates."""
    parsed = parse_date(raw)
    return parsed.isoformat() if parsed else None


@functools.lru_cache(maxsize=4096)
def _day_first(iso: str) -> str:
    return dt.date.fromisoformat(iso).strftime("%d/%m/%Y")


def measures_as_sentences(measures: list[dict]) -> str | None:
    """Readable remedy text: one sentence per measure, e.g. "Recall of the product from end
    users (by the manufacturer), in force from 14/07/2026."."""
    sentences = []
    for m in measures:
        if not m.get("measure"):
            continue
        sentence = m["measure"]
        if m.get("operator") and m["operator"].lower() != "other":
            who = m["operator"].lower()
            sentence += f" (ordered to the {who})" if m.get("ordered") else f" (by the {who})"
        if m.get("entry_into_force"):
            sentence += ", in force from " + _day_first(m["entry_into_force"])
        sentences.append(sentence + ".")
    return "\n".join(sentences) or None


_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(])")
_COMPLIANCE_RE = re.compile(r"\b(not comply|non-complian|not compliant|does not meet the requirements)", re.I)
_CONSEQUENCE_START_RE = re.compile(
    r"^(as a (consequence|result)|consequently|therefore|this (could|may|can|might|would|increases|poses)|"
    r"in the (event|worst case|case of)|if |under certain conditions|risk of|danger of)", re.I)
_HEADLINE_RE = re.compile(r"^(risk|danger)s? of [^.]{1,60}\.?$", re.I)


def split_danger(text: str | None) -> dict:
    """`danger` → defect_cause (what is wrong), consequence (what may happen) and the
    compliance statement, following the order in which the alerts are written."""
    if not text:
        return {"defect_cause": None, "consequence": None, "compliance": None}
    sentences = [s.strip() for s in _SENTENCE_END_RE.split(text) if s.strip()]
    cause, consequence, compliance = [], [], []
    # Legacy alerts open with a headline such as "Risk of injury." before the defect.
    if len(sentences) > 1 and _HEADLINE_RE.match(sentences[0]):
        consequence.append(sentences.pop(0))
    in_consequence = False
    for sentence in sentences:
        if _COMPLIANCE_RE.search(sentence):
            compliance.append(sentence)
        elif in_consequence or (cause and _CONSEQUENCE_START_RE.match(sentence)):
            in_consequence = True
            consequence.append(sentence)
        else:
            cause.append(sentence)
    return {"defect_cause": " ".join(cause) or None, "consequence": " ".join(consequence) or None,
            "compliance": " ".join(compliance) or None}


_QUOTED_NAME_RE = re.compile(r"[“\"„]([^”\"“]+)(?:[”\"]|$)")


def names_from_description(description: str | None) -> tuple[str | None, str | None]:
    """Legacy alerts have no brand / name fields; their description quotes “Brand - Model”."""
    if not description:
        return None, None
    m = _QUOTED_NAME_RE.search(description)
    if not m:
        return None, None
    quoted = m.group(1).strip().rstrip(".,;").strip()
    # The closing quote is sometimes typed as ")": “Mercedes-Benz - CLK Cabriolet A 209)
    while quoted.endswith(")") and quoted.count(")") > quoted.count("("):
        quoted = quoted[:-1].rstrip()
    pieces = re.split(r"\s+[-–]\s+", quoted, maxsplit=1)
    if len(pieces) == 2:
        return pieces[0].strip() or None, pieces[1].strip() or None
    return None, quoted or None
