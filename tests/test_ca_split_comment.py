"""sources.ca.split_comment finds the same headings as the look-behind pattern it replaced
(a heading starts the comment or follows white space), on the edge cases and on random text."""
from __future__ import annotations

import random
import re

from sources.ca import split_comment

_OLD = re.compile(r"(?:^|(?<=\s))(Issue|Safety\s+Risk|Corrective\s+Actions?)\s*:\s*", re.IGNORECASE)
_FIELD = {"issue": "defect_cause_original", "safety risk": "consequence_original",
          "corrective action": "remedy_original", "corrective actions": "remedy_original"}


def _reference(comment: str) -> dict[str, str]:
    matches = list(_OLD.finditer(comment))
    fields: dict[str, str] = {}
    for position, match in enumerate(matches):
        end = matches[position + 1].start() if position + 1 < len(matches) else len(comment)
        body = comment[match.end():end].strip()
        name = _FIELD[re.sub(r"\s+", " ", match.group(1).lower())]
        if body and name not in fields:
            fields[name] = body
    return fields


def test_edge_cases_match_the_look_behind_pattern():
    cases = ["Issue: a\nSafety Risk: b\nCorrective Actions: c",
             "XIssue: not a heading. Issue: the heading",
             "MisIssue:Issue: x", "issue:issue: y", "SAFETY\u00a0\u00a0RISK : z\tCORRECTIVE ACTION: w",
             "Safety Issue: q", "a.Issue: no\u2003Issue: yes", "Issue:", "Issue: \n ", ""]
    for comment in cases:
        assert split_comment(comment) == _reference(comment), comment


def test_random_texts_match_the_look_behind_pattern():
    rng = random.Random(8)
    pieces = ["Issue", "issue", "Safety", "Risk", "Corrective", "Actions", "Action", ":", " ", "\n", "\u00a0",
              "x", "Mis", ".", "word"]
    for _ in range(20_000):
        comment = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        assert split_comment(comment) == _reference(comment), repr(comment)
