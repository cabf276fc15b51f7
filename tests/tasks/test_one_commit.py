"""No history beyond base_commit where the agent works: a repository that comes with later commits, tags, a
branch, a stash and a dangling object (a published image's /testbed) is re-created as one commit of its
working tree, on a host directory and inside a docker image."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from verl_swe.tasks.snapshot import git, one_commit

# What the checks run, in the repository, and what a one-commit repository answers.
CHECKS = ("git log --all --oneline | wc -l; git fsck --lost-found 2>&1 | grep -c . ; "
          "git cat-file --batch-all-objects --batch-check | wc -l; git stash list | wc -l; git tag | wc -l; "
          "git branch -a | wc -l; ls .git/logs 2>/dev/null | wc -l; git status --porcelain; "
          "cat a.py kept.log; git grep -c fix $(git rev-list --all) -- 2>/dev/null | wc -l")


def history_repo(repo: Path) -> tuple[str, str]:
    """A repository at base (a.py = "base", a tracked file that .gitignore matches) with the fix in its later
    history: a commit, an annotated tag, a branch, a stash of a change, and a dangling blob of the fix."""
    repo.mkdir(parents=True)
    for path, text in {"a.py": "base\n", ".gitignore": "*.log\n", "kept.log": "tracked though ignored\n"}.items():
        (repo / path).write_text(text)
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", "-A", cwd=repo)
    git("add", "-f", "kept.log", cwd=repo)
    git("commit", "-qm", "base", cwd=repo)
    base = git("rev-parse", "HEAD", cwd=repo)
    (repo / "a.py").write_text("the fix\n")
    git("commit", "-qam", "the fix", cwd=repo)
    fix = git("rev-parse", "HEAD", cwd=repo)
    git("tag", "-a", "v2", "-m", "fixed release", cwd=repo)
    git("branch", "fixed", cwd=repo)
    git("reset", "-q", "--hard", base, cwd=repo)
    (repo / "a.py").write_text("the fix, stashed\n")
    git("stash", "-q", cwd=repo)
    subprocess.run(["git", "hash-object", "-w", "--stdin"], input="the fix, dangling\n", text=True, cwd=repo,
                   check=True, capture_output=True)
    (repo / "build.log").write_text("an ignored build output\n")  # stays untracked and ignored
    assert int(git("rev-list", "--all", "--count", cwd=repo)) >= 3
    return base, fix


def expect_one_commit(output: str) -> None:
    lines = output.split("\n")
    # one commit; fsck finds nothing lost; 5 objects (commit, tree, 3 blobs); no stash, tag, other branch, reflog
    assert lines[:7] == ["1", "0", "5", "0", "0", "1", "0"], output
    assert lines[7:9] == ["base", "tracked though ignored"], output  # a clean status, the base files
    assert lines[9] == "0", output  # nothing reachable mentions the fix


def test_a_repository_with_history_becomes_one_commit(tmp_path):
    repo = tmp_path / "repo"
    history_repo(repo)
    one_commit(repo)
    out = subprocess.run(["sh", "-c", CHECKS], cwd=repo, capture_output=True, text=True, check=True).stdout
    expect_one_commit(out)
    assert git("status", "--porcelain", "--ignored", cwd=repo) == "!! build.log"
    # a directory without a repository (a harbor image's WORKDIR) gets one of every file there
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.py").write_text("x\n")
    (plain / "out.log").write_text("y\n")
    one_commit(plain)
    assert git("ls-files", cwd=plain).split() == ["a.py", "out.log"] and not git("status", "--porcelain", cwd=plain)


@pytest.mark.docker
async def test_a_published_image_keeps_no_history(tmp_path):
    # A published image (SWE-bench's keep the project's whole clone at /testbed): the sandbox sees one commit.
    import docker

    from verl_swe.sandbox import open_sandbox
    from verl_swe.tasks import Environments, Task

    ctx = tmp_path / "ctx"
    base, fix = history_repo(ctx / "repo")
    (ctx / "Dockerfile").write_text("FROM verl-swe/base:bookworm\nCOPY repo /testbed\nWORKDIR /testbed\n")
    client = docker.from_env()
    tag = f"verl-swe/test-published:{tmp_path.name.lower()[-20:]}"
    client.images.build(path=str(ctx), tag=tag, rm=True, network_mode="none", labels={"verl-swe": "test"})
    task = Task.model_validate({"instance_id": "acme__published-1", "repo": "acme/published", "base_commit": base,
                                "problem_statement": "x", "test_patch": "", "FAIL_TO_PASS": ["t.py::t"],
                                "image": tag})
    envs = Environments("docker", cache_dir=tmp_path / "cache")
    made = []
    try:
        config = await envs.prepare(task)
        made.append(config.image)
        assert config.image != tag
        async with open_sandbox(config) as box:
            expect_one_commit((await box.exec(CHECKS)).output)
            assert (await box.exec(f"git cat-file -e {fix} 2>/dev/null || echo hidden")).output.strip() == "hidden"
    finally:
        envs.close()
        for name in [*made, tag]:
            client.images.remove(name, force=True)
