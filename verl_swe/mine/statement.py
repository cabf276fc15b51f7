"""A mined task's problem statement, and the rule that it does not give the fix away.

The statement is the issue the PR fixes when there is one, else the PR's own text, else the commit message
(marked as such in `meta.problem_statement_source`: a commit message often says what was changed rather than
what was wrong). It must not leak: no diff hunks, and no names of the tests the test patch adds (the agent
must find the failure, not read which test to make pass).
"""

from __future__ import annotations

import re

_HUNK = re.compile(r"^(@@ -\d+(,\d+)? \+\d+(,\d+)? @@|diff --git |\+\+\+ b/|--- a/)", re.M)
_ADDED_TEST = re.compile(r"^\+\s*(?:async\s+)?(?:def|class)\s+((?:test|Test)\w*)", re.M)


def problem_statement(subject: str, body: str, pr: dict | None) -> tuple[str, str]:
    """(statement, its source: issue | pr | commit_message)."""
    pr = pr or {}
    if pr.get("issue_title") or pr.get("issue_body"):
        return _join(pr.get("issue_title"), pr.get("issue_body")), "issue"
    if pr.get("title") or pr.get("body"):
        return _join(pr.get("title"), pr.get("body")), "pr"
    return _join(subject, body), "commit_message"


def _join(title: str | None, body: str | None) -> str:
    return "\n\n".join(part.strip() for part in (title, body) if part and part.strip())


def added_test_names(test_patch: str) -> set[str]:
    """The test functions and classes the test patch adds."""
    return set(_ADDED_TEST.findall(test_patch))


def leaks(statement: str, patch: str, test_patch: str) -> list[str]:
    """Why the statement gives the fix away (empty when it does not)."""
    found = []
    if _HUNK.search(statement):
        found.append("it contains a diff hunk")
    added = {line[1:].strip() for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")}
    quoted = sorted(line for line in added if len(line) >= 20 and line in statement)  # short lines are common
    if quoted:
        found.append(f"it quotes {len(quoted)} added line(s) of the fix, e.g. {quoted[0][:80]!r}")
    named = sorted(n for n in added_test_names(test_patch) if re.search(rf"\b{re.escape(n)}\b", statement))
    if named:
        found.append(f"it names the test(s) the test patch adds: {', '.join(named[:5])}")
    return found
