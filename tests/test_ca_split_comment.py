"""sources.ca.split_comment finds the same headings as the look-behind pattern it replaced
(a heading starts the comment or follows white space), on the edge cases and on random text."""
from __future__ import annotations

import random
import re

from sources.ca import split_comment

_OLD = re.compile(r"(?:^|(?<=\s))(Issue|Safety\s+Risk|Corrective\s+Actions?)\s*:\s*", re.IGNORECASE)
_FIELD = {"issue": "defect_cause_original", "safety risk": "consequence_original",
          "corrective action": "remedy_original", "corrective actions": "remedy_original"}
# What IGNORECASE matches for a letter besides its two ASCII cases, written back as ASCII.
_UNICODE_CASES = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})


def _reference(comment: str) -> dict[str, str]:
    matches = list(_OLD.finditer(comment))
    fields: dict[str, str] = {}
    for position, match in enumerate(matches):
        end = matches[position + 1].start() if position + 1 < len(matches) else len(comment)
        body = comment[match.end():end].strip()
        name = _FIELD[re.sub(r"\s+", " ", match.group(1).translate(_UNICODE_CASES).lower())]
        if body and name not in fields:
            fields[name] = body
    return fields


def test_edge_cases_match_the_look_behind_pattern():
    cases = ["Issue: a\nSafety Risk: b\nCorrective Actions: c",
             "XIssue: not a heading. Issue: the heading",
             "MisIssue:Issue: x", "issue:issue: y", "SAFETY\u00a0\u00a0RISK : z\tCORRECTIVE ACTION: w",
             "Safety Issue: q", "a.Issue: no\u2003Issue: yes", "Issue:", "Issue: \n ", "",
             # Headings IGNORECASE matches in Unicode letters (each once made the recall a parse error).
             "\u0130ssue: a \u0131ssue: b Safety Ris\u212a: c Corrective Action\u017f: d"]
    for comment in cases:
        assert split_comment(comment) == _reference(comment), comment


def test_random_texts_match_the_look_behind_pattern():
    rng = random.Random(8)
    # (and in any case: the pattern spells each letter's cases as IGNORECASE matches them)
    pieces = ["Issue", "issue", "ISSUE", "\u0130ssue", "\u0131\u017fsue", "Safety", "SAFETY", "\u017fafety", "Risk", "RISK",
              "Ris\u212a", "risK", "Corrective", "CORRECTIVE", "correct\u0131ve", "Actions", "ACTIONS", "Action\u017f",
              "Action", "act\u0130on", ":", " ", "\n", "\u00a0", "x", "Mis", ".", "word"]
    for _ in range(20_000):
        comment = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        assert split_comment(comment) == _reference(comment), repr(comment)
