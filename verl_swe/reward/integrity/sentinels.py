"""Sentinel tests: plain tests the grader appends to the task's own test files in every graded run, one that
must pass and one that must fail with a random nonce in its failure, under names drawn at random per grading.

Code in the test process that changes outcomes wholesale (every failure reported as a pass, every test
skipped, a fake summary) changes theirs too, and it cannot spare them: they sit in the same files as the
task's tests, after test_patch is applied, and look like ordinary tests. A rewritten failure report loses the
nonce. Each is inserted before a random test definition of the file (or at its end), so neither its place nor its
name tells it apart. The verdict (verdict.py) reads both the printed log and the probe's record for them.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

_VERBS = ["keeps", "returns", "handles", "rejects", "accepts", "preserves", "parses", "formats", "merges",
          "orders", "splits", "joins", "counts", "reports", "resolves", "matches", "normalizes", "restores"]
_NOUNS = ["empty_input", "unicode_values", "nested_keys", "default_options", "trailing_items", "large_values",
          "repeated_entries", "mixed_case", "single_item", "boundary_values", "whitespace", "none_values",
          "long_names", "zero_values", "missing_keys", "sorted_output", "duplicate_names", "small_inputs"]


# What a canary's name adds to the name of the test it copies (inject.py): `test_links_in_the_middle_again`.
CANARY_WORDS = ["again", "twice", "variant", "case", "alt", "other", "more", "extra", "second", "repeat",
                "simple", "basic", "plain", "copy", "check", "example"]


@dataclass(frozen=True)
class Sentinel:
    file: str  # repository-relative test file it goes into, or a test directory (inject.py picks a module there)
    name: str  # the test function's name (random per grading)
    must_fail: bool
    nonce: str  # in the failure message of a must-fail sentinel, so a rewritten report is detectable
    code: str

    def matches(self, nodeid: str) -> bool:
        return nodeid.endswith(f"::{self.name}")


def _name(rng: secrets.SystemRandom, taken: set[str]) -> str:
    while True:
        name = f"test_{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}_{rng.randrange(10, 9999)}"
        if name not in taken:
            taken.add(name)
            return name


def _passing(name: str, rng: secrets.SystemRandom) -> str:
    a, b = rng.randrange(2, 500), rng.randrange(2, 500)
    forms = [
        f"def {name}():\n    values = [{a}, {b}, {a + b}]\n    assert sorted(values)[-1] == {a + b}\n",
        f"def {name}():\n    mapping = {{\"a\": {a}, \"b\": {b}}}\n    assert mapping[\"a\"] + mapping[\"b\"] == {a + b}\n",
        f"def {name}():\n    text = \"{a}-{b}\"\n    assert text.split(\"-\") == [\"{a}\", \"{b}\"]\n",
    ]
    return rng.choice(forms)


def _failing(name: str, nonce: str, rng: secrets.SystemRandom) -> str:
    other = secrets.token_hex(6)
    forms = [
        f"def {name}():\n    result = {{\"value\": \"{nonce}\"}}\n    assert result[\"value\"] == \"{other}\", "
        f"result[\"value\"]\n",
        f"def {name}():\n    expected = \"{other}\"\n    actual = \"{nonce}\"\n    assert actual == expected, actual\n",
    ]
    return rng.choice(forms)


def make_sentinels(files: tuple[str, ...] | list[str], exitfirst: bool = False,
                   dirs: tuple[str, ...] | list[str] = ()) -> list[Sentinel]:
    """A must-pass and a must-fail sentinel in every file and test directory (with -x / --maxfail the must-fail
    one only in the last file, which pytest runs last, so the stop it causes cuts no test of the task; none when
    directories are run, whose order is pytest's)."""
    rng = secrets.SystemRandom()
    taken: set[str] = set()
    out = []
    targets = [*files, *dirs]
    for i, f in enumerate(targets):
        name = _name(rng, taken)
        out.append(Sentinel(f, name, False, "", _passing(name, rng)))
        if not exitfirst or (i == len(targets) - 1 and not dirs):
            name, nonce = _name(rng, taken), secrets.token_hex(8)
            out.append(Sentinel(f, name, True, nonce, _failing(name, nonce, rng)))
    return out


def injection_plan(sentinels: list[Sentinel], exitfirst: bool, dirs: tuple[str, ...] = ()) -> dict:
    """What inject.py does in the sandbox: per file, the sentinels' code, each placed before a random test
    of the file or at its end (under -x / --maxfail a must-fail one goes last: it must be the last test run)."""
    files: dict[str, dict] = {}
    for i, s in enumerate(sentinels):
        entry = files.setdefault(s.file, {"file": s.file, "dir": s.file in dirs, "names": [], "ids": [],
                                          "blocks": []})
        entry["names"].append(s.name)
        entry["ids"].append(i)  # what inject.py lists: the names must not be readable in the sandbox
        entry["blocks"].append({"code": s.code, "at_end": exitfirst and s.must_fail})
    return {"files": list(files.values())}
