"""Candidate fixes from a repository's history: commits (or merged PRs) that change library code and tests.

Each candidate is diffed against its first parent (a PR's merge commit against the branch it was merged into:
the whole PR) and split into the gold `patch` (every file that is not a test) and the `test_patch` (the test
files), as SWE-bench and SWE-rebench split a PR.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

# The grader's own rule (reward/patch_guard.py), so a mined task's tests are the files the grader protects.
from verl_swe.reward.patch_guard import is_test_path

class MineError(RuntimeError):
    """The repository or an input file could not be read as asked."""


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if done.returncode:
        raise MineError(f"git {' '.join(args[:3])} in {repo}: {done.stderr.strip()[-500:]}")
    return done.stdout


def is_library_source(path: str) -> bool:
    """Python source a fix changes: not a test, not packaging, docs or examples."""
    p = PurePosixPath(path)
    return (p.suffix in (".py", ".pyi") and not is_test_path(path) and p.name != "setup.py"
            and not (p.parts and p.parts[0] in ("docs", "doc", "examples", "benchmarks", "scripts")))


@dataclass
class Candidate:
    commit: str
    parent: str
    created_at: str  # the commit's date, ISO 8601
    subject: str
    body: str
    source_files: list[str]
    test_files: list[str]
    other_files: list[str] = field(default_factory=list)  # non-test files that are not library source (docs, ...)
    pr: dict | None = None  # the PR row from --prs: number, title, body, issue_title, issue_body

    @property
    def short(self) -> str:
        return self.commit[:12]

    def patches(self, repo: Path) -> tuple[str, str]:
        """(gold patch: every non-test file, test_patch: the test files), as `git diff` of parent..commit."""
        def diff(paths: list[str]) -> str:
            return git(repo, "diff", "--no-color", "--no-renames", "--binary", self.parent, self.commit, "--",
                       *paths) if paths else ""

        return diff(self.source_files + self.other_files), diff(self.test_files)


def _candidate(repo: Path, commit: str, parent: str | None = None, pr: dict | None = None) -> Candidate | None:
    fmt = "%H%x00%P%x00%cI%x00%s%x00%b"
    sha, parents, date, subject, body = git(repo, "show", "-s", f"--format={fmt}", commit).split("\0", 4)
    parent = parent or (parents.split() or [None])[0]
    if parent is None:
        return None  # the root commit: nothing to fix
    files = git(repo, "diff", "--name-only", "--no-renames", parent, sha).split()
    tests = [f for f in files if is_test_path(f)]
    source = [f for f in files if is_library_source(f)]
    if not tests or not source:
        return None
    other = [f for f in files if f not in tests and f not in source]
    return Candidate(sha, parent, date, subject.strip(), body.strip(), source, tests, other, pr)


def commit_candidates(repo: Path, since: str | None = None, commits: str | None = None) -> tuple[list[Candidate], int]:
    """(candidates, commits looked at) on the first-parent line of `commits` (A..B; default HEAD), newest first."""
    args = ["rev-list", "--first-parent", *([f"--since={since}"] if since else []), commits or "HEAD"]
    shas = git(repo, *args).split()
    found = [c for c in (_candidate(repo, sha) for sha in shas) if c is not None]
    return found, len(shas)


def pr_candidates(repo: Path, prs_file: Path) -> tuple[list[Candidate], int]:
    """Candidates from a JSONL of merged PRs: `merge_commit` (or `commit`), optional `base_commit`, `number`,
    `title`, `body`, and the issue it fixes (`issue_title`, `issue_body`). A bad row is named by its line."""
    rows = []
    for n, line in enumerate(Path(prs_file).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            commit = row.get("merge_commit") or row["commit"]
        except (ValueError, KeyError, AttributeError) as e:
            raise MineError(f"{prs_file}:{n}: a PR row needs merge_commit (or commit): {type(e).__name__}: {e}") \
                from None
        rows.append((commit, row))
    found = [c for c in (_candidate(repo, commit, row.get("base_commit"), row) for commit, row in rows) if c]
    return found, len(rows)
