"""Single-commit git snapshots of a source tree, with a deterministic commit hash.

A task sandbox gets its repository as one commit holding the files at `base_commit`: the agent sees
a clean `git diff`, and none of the project's later history (which contains the fix) is reachable.
Images that come with a repository (SWE-bench's, harbor's) get the same through `ONE_COMMIT_SH`.
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


# Run in an image (POSIX sh, any git >= 1.8.5): the repository in directory $1 re-created as one commit of its
# working tree as the image holds it, so no later commit, tag, branch, stash, reflog, packed or dangling
# object is left to find the fix in. A fresh repository is certain where pruning refs and objects is not
# (replace refs, alternates, packs kept by .keep files). Tracked files stay tracked even where .gitignore
# matches them: the tree is taken from the old index after `git add -A`. Without a repository, one is made
# of every file there.
ONE_COMMIT_SH = r"""set -eu
cd "$1"
export GIT_AUTHOR_NAME=verl-swe GIT_AUTHOR_EMAIL=verl-swe@localhost GIT_COMMITTER_NAME=verl-swe
export GIT_COMMITTER_EMAIL=verl-swe@localhost GIT_AUTHOR_DATE=2025-01-01T00:00:00+0000
export GIT_COMMITTER_DATE=2025-01-01T00:00:00+0000 GIT_CONFIG_NOSYSTEM=1
if ! git rev-parse --git-dir >/dev/null 2>&1; then
  git init -q && git add -A -f
  tree=$(git write-tree)
elif [ -d .git ]; then
  git add -A
  tree=$(git write-tree)
  new=$(mktemp -d)
  git init -q "$new"
  git rev-list --objects "$tree" | git pack-objects -q --stdout | (cd "$new" && git index-pack --stdin >/dev/null)
  cp .git/info/exclude "$new/.git/info/exclude" 2>/dev/null || :
  rm -rf .git && mv "$new/.git" .git && rmdir "$new"
else
  echo "$PWD/.git is not a directory: not re-creating a repository kept elsewhere" >&2
  exit 1
fi
commit=$(echo base | git commit-tree "$tree")
git update-ref refs/heads/main "$commit" && git symbolic-ref HEAD refs/heads/main
git read-tree "$tree" && git update-index -q --refresh >/dev/null || :
rm -rf .git/logs
"""


def one_commit(repo: Path) -> str:
    """`ONE_COMMIT_SH` on a directory here (what an image gets); returns the commit hash."""
    proc = subprocess.run(["sh", "-c", ONE_COMMIT_SH, "one_commit", str(repo)], capture_output=True, text=True,
                          env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull})
    if proc.returncode:
        raise GitError(f"re-creating the repository in {repo} as one commit failed: {proc.stderr.strip()}")
    return git("rev-parse", "HEAD", cwd=repo)
