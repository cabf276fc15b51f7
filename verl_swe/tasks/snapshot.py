"""Single-commit git snapshots of a source tree, with a deterministic commit hash.

A task sandbox gets its repository as one commit holding the files at `base_commit`: the agent sees
a clean `git diff`, and none of the project's later history (which contains the fix) is reachable.
The bundled `envs/mini` repositories are materialized the same way, so their `base_commit` is the
same on every machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

# Fixed identity and date: the same files always give the same commit hash.
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "verl-swe",
    "GIT_AUTHOR_EMAIL": "verl-swe@localhost",
    "GIT_COMMITTER_NAME": "verl-swe",
    "GIT_COMMITTER_EMAIL": "verl-swe@localhost",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00+0000",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


class GitError(RuntimeError):
    pass


def git(*args: str, cwd: Path | str, check: bool = True) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env={**os.environ, **_GIT_ENV}
    )
    if check and proc.returncode:
        raise GitError(f"git {' '.join(args)} in {cwd} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


def commit_tree(dest: Path, message: str = "base") -> str:
    """Make `dest` (a plain directory) a git repository with all its files in one commit."""
    if (dest / ".git").exists():
        shutil.rmtree(dest / ".git")
    git("init", "-q", "-b", "main", cwd=dest)
    git("add", "-A", "-f", cwd=dest)
    git("commit", "-q", "--no-verify", "--allow-empty", "-m", message, cwd=dest)
    return git("rev-parse", "HEAD", cwd=dest)


def snapshot_directory(src: Path, dest: Path) -> str:
    """Copy a plain source tree to `dest` and commit it; returns the commit hash."""
    shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.pyc"))
    return commit_tree(dest)


def snapshot_commit(repo: Path, commit: str, dest: Path) -> str:
    """Check out `commit` of the clone `repo` into `dest` as a fresh single-commit repository.

    `git archive` would drop `export-ignore` files, so the files are checked out with a throwaway
    index instead.
    """
    git("cat-file", "-e", f"{commit}^{{commit}}", cwd=repo)
    dest.mkdir(parents=True)
    index = dest.parent / f".{dest.name}.index"
    try:
        subprocess.run(
            ["git", f"--work-tree={dest}", "checkout", commit, "--", "."],
            cwd=repo, check=True, capture_output=True, env={**os.environ, "GIT_INDEX_FILE": str(index)},
        )
    except subprocess.CalledProcessError as e:
        raise GitError(f"checking out {commit} of {repo} failed: {e.stderr.decode(errors='replace')}") from e
    finally:
        index.unlink(missing_ok=True)
    return commit_tree(dest, message=f"base {commit}")
