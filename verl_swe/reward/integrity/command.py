"""What a task's test command runs, as far as the integrity checks need to know: is it pytest, which test
files does it run whole (those get sentinels), and does it stop at the first failure."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from pathlib import PurePosixPath

from verl_swe.reward.patch_guard import TEST_DIRS as _TEST_DIRS
from verl_swe.reward.patch_guard import is_test_path

# swebench's parsers of pytest output (every Python parser but Django's and SymPy's own runners).
PYTEST_PARSERS = {"parse_log_pytest", "parse_log_pytest_options", "parse_log_pytest_v2", "parse_log_seaborn",
                  "parse_log_matplotlib", "parse_log_astroid", "parse_log_flask", "parse_log_marshmallow",
                  "parse_log_pvlib", "parse_log_pyvista", "parse_log_sqlfluff", "parse_log_xarray",
                  "parse_log_pydicom", "parse_log_requests", "parse_log_pylint", "parse_log_astropy",
                  "parse_log_scikit", "parse_log_sphinx"}
# Options that select tests by name, marker or history: an appended sentinel could be deselected by them.
_SELECTING = {"-k", "-m", "--deselect", "--lf", "--last-failed", "--ff", "--failed-first", "--nf", "--new-first",
              "--sw", "--stepwise", "--sw-skip", "--stepwise-skip", "--co", "--collect-only"}
_EXITFIRST = {"-x", "--exitfirst", "--maxfail"}
_TAKES_VALUE = set("kmpcoWrnl")  # short options whose value may follow in the same word


@dataclass(frozen=True)
class RunShape:
    pytest: bool  # a pytest run whose log a pytest-family parser reads
    files: tuple[str, ...] = ()  # the task's test files the command runs whole, in command-line order
    dirs: tuple[str, ...] = ()  # test directories the command runs (a sentinel goes into a random module there)
    exitfirst: bool = False  # -x / --maxfail: a failing sentinel may only come last
    notes: tuple[str, ...] = field(default_factory=tuple)  # why some integrity checks do not apply


def _words(command: str) -> list[str]:
    """Shell words, line by line (a line ends a command like `;`)."""
    words: list[str] = []
    for line in command.splitlines():
        try:
            words += shlex.split(line, comments=True)
        except ValueError:  # unbalanced quotes in a script line: fall back to whitespace
            words += line.split()
        words.append(";")
    return words


_SEPARATORS = {";", "&&", "||", "|", "&"}


def _pytest_words(words: list[str]) -> list[str] | None:
    """The arguments of every pytest invocation (`pytest ...`, `py.test ...`, `python -m pytest ...`)."""
    out, found, inside = [], False, False
    for i, w in enumerate(words):
        if w in _SEPARATORS or w.endswith(";"):
            inside = False
            continue
        if w.split("/")[-1] in ("pytest", "py.test") and (i == 0 or words[i - 1] != "-p"):
            found = inside = True
            continue
        if inside:
            out.append(w)
    return out if found else None


def _short_flags(word: str) -> list[str]:
    """`-vxq` -> -v -x -q; an option that takes a value ends the bundle (`-rxs` is -r with "xs")."""
    if not word.startswith("-") or word.startswith("--") or len(word) < 2:
        return []
    flags = []
    for c in word[1:]:
        flags.append(f"-{c}")
        if c in _TAKES_VALUE:
            break
    return flags


def analyze(command: str, log_parser: str, test_files: list[str]) -> RunShape:
    """`command`: the test command line(s) (for eval scripts, the lines between swebench's markers)."""
    if log_parser not in PYTEST_PARSERS:
        return RunShape(False, notes=(f"{log_parser} reads a runner other than pytest: only the static flags, the "
                                      "test-file checks and the exit code apply",))
    words = _pytest_words(_words(command))
    if words is None:
        return RunShape(False, notes=("the test command does not run pytest directly: only the static flags, the "
                                      "test-file checks and the exit code apply",))
    flags = {w.split("=", 1)[0] for w in words if w.startswith("--")} | {f for w in words for f in _short_flags(w)}
    selecting = sorted(flags & _SELECTING)
    exitfirst = bool(flags & _EXITFIRST)
    # The task's test files, and test modules the command names itself (rows whose test_patch adds none).
    named = [w.removeprefix("./") for w in words if w.endswith(".py") and "::" not in w and not w.startswith("-")
             and is_test_path(w.removeprefix("./"))]
    test_files = list(dict.fromkeys([*test_files, *named]))
    whole = [f for f in test_files if any(w in (f, f"./{f}") for w in words)]
    partial = [f for f in test_files if any(w.startswith((f"{f}::", f"./{f}::")) for w in words)]
    dirs = _test_dirs(words)
    notes = []
    if selecting:
        notes.append(f"the test command selects tests ({', '.join(selecting)}): no sentinel tests")
        whole, dirs = [], []
    elif partial:
        notes.append(f"the test command runs single tests of {', '.join(partial)}: no sentinels there")
        whole = [f for f in whole if f not in partial]
    if not whole and not dirs and not notes:
        notes.append("the test command names none of the task's test files or directories: no sentinel tests")
    return RunShape(True, tuple(whole), tuple(dirs), exitfirst, tuple(notes))


# Options whose value is the next word (it is not a path to run).
_VALUE_OPTIONS = {"-p", "-k", "-m", "-c", "-o", "-W", "-r", "-n", "--rootdir", "--ignore", "--ignore-glob",
                  "--deselect", "--confcutdir", "--basetemp", "--junitxml", "--junit-xml", "--log-file",
                  "--override-ini", "--maxfail", "--tb", "--durations", "--cov", "--cov-report", "--timeout"}


def _test_dirs(words: list[str]) -> list[str]:
    """Directory arguments that are test directories (`tests`, `pkg/tests/unit`): not options, their values,
    modules or node ids."""
    out = []
    for i, w in enumerate(words):
        if w.startswith("-") or w == ";" or "::" in w or w.endswith(".py") or (i and words[i - 1] in _VALUE_OPTIONS):
            continue
        parts = PurePosixPath(w.removeprefix("./")).parts
        if parts and set(parts) & _TEST_DIRS and all(p not in ("..",) and not p.startswith("$") for p in parts):
            out.append(str(PurePosixPath(*parts)))
    return list(dict.fromkeys(out))
