"""Where a task's repository comes from, and its single-commit snapshots, cached on disk.

Order: a clone in `--repos-dir` (`owner__name`), the bundled `envs/mini` sources for
`verl-swe-mini/*` tasks, else a clone from GitHub (only where it is reachable).
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import shutil
import subprocess
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import AsyncIterator, Iterator

from verl_swe.tasks.schema import Task
from verl_swe.tasks.snapshot import GitError, snapshot_commit, snapshot_directory

MINI_OWNER = "verl-swe-mini"


class RepoError(RuntimeError):
    pass


def default_cache_dir() -> Path:
    return Path(os.environ.get("VERL_SWE_CACHE") or Path.home() / ".cache" / "verl-swe")


def mini_dir() -> Path:
    """The bundled `envs/mini` suite (next to the package in a source checkout)."""
    return Path(os.environ.get("VERL_SWE_MINI_DIR") or Path(__file__).resolve().parents[2] / "envs" / "mini")


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock across processes (Ray workers on one node build each thing once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


_async_locks: dict[tuple[int, str], asyncio.Lock] = {}


@asynccontextmanager
async def async_file_lock(path: Path) -> AsyncIterator[None]:
    """`file_lock` for coroutines: one waiter per path in this process, so waiting never fills the
    thread pool that the lock holder itself needs."""
    # Keyed by loop too: an asyncio.Lock belongs to the loop that first waits on it.
    lock = _async_locks.setdefault((id(asyncio.get_running_loop()), str(path)), asyncio.Lock())
    async with lock:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "w")
        try:
            await asyncio.to_thread(fcntl.flock, f, fcntl.LOCK_EX)
            yield
        finally:
            f.close()  # closing releases the flock


class RepoStore:
    """Blocking (git) operations; callers run them in a thread."""

    def __init__(self, cache_dir: Path, repos_dir: Path | None = None):
        self.cache_dir = Path(cache_dir)
        self.repos_dir = Path(repos_dir) if repos_dir else None

    def clone(self, task: Task) -> Path:
        name = task.repo_dirname
        if self.repos_dir is not None and (self.repos_dir / name).exists():
            return self.repos_dir / name
        dest = self.cache_dir / "repos" / name
        with file_lock(self.cache_dir / "locks" / f"repo-{name}.lock"):
            if (dest / ".git").exists():
                return dest
            tmp = dest.with_name(f".{name}.tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            owner, repo = task.repo.split("/")
            if owner == MINI_OWNER:
                src = mini_dir() / "tasks" / repo / "repo"
                if not src.is_dir():
                    raise RepoError(f"{task.instance_id}: bundled repository {src} does not exist")
                snapshot_directory(src, tmp)
            else:
                self._clone_from_github(task, tmp)
            tmp.rename(dest)
        return dest

    def _clone_from_github(self, task: Task, dest: Path) -> None:
        where = f"not in --repos-dir {self.repos_dir}" if self.repos_dir else "no --repos-dir given"
        # A mirror (an internal git server) can stand in for GitHub: VERL_SWE_GIT_URL="https://git.corp/{repo}.git".
        url = os.environ.get("VERL_SWE_GIT_URL", "https://github.com/{repo}.git").format(repo=task.repo)
        proc = subprocess.run(["git", "clone", "-q", url, str(dest)], capture_output=True, text=True,
                              env={**os.environ, "GIT_TERMINAL_PROMPT": "0"}, timeout=1800)
        if proc.returncode:
            shutil.rmtree(dest, ignore_errors=True)
            raise RepoError(f"{task.instance_id}: repository {task.repo} is {where} ({task.repo_dirname}/), "
                            f"and cloning {url} failed: {proc.stderr.strip()[-300:]}")

    def snapshot(self, task: Task, commit: str) -> Path:
        """The files of `commit` as a fresh one-commit repository (no later history to peek at)."""
        key = hashlib.sha256(f"{task.repo}@{commit}".encode()).hexdigest()[:16]
        dest = self.cache_dir / "snapshots" / f"{task.repo_dirname}@{commit[:12]}-{key}"
        if (dest / ".git").exists():
            return dest
        clone = self.clone(task)
        with file_lock(self.cache_dir / "locks" / f"snap-{key}.lock"):
            if (dest / ".git").exists():
                return dest
            tmp = dest.with_name(dest.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                snapshot_commit(clone, commit, tmp)
            except GitError as e:
                shutil.rmtree(tmp, ignore_errors=True)
                raise RepoError(f"{task.instance_id}: commit {commit} of {task.repo} is not in {clone}: {e}") from e
            tmp.rename(dest)
        return dest

