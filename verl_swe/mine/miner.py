"""`verl-swe mine`: a repository's history -> validated SWE tasks, written as SWE-rebench writes its rows.

Per candidate (history.py): the environment is built as the grader builds it (at the base commit, offline);
the tests run before and after the fix, repeated (validate.py); a task is kept when some test goes from failing
to passing in every repeat and its statement does not leak the fix (statement.py); an LLM judge scores kept
rows when one is configured (judge.py). Each candidate's outcome is saved as it finishes
(`OUT/candidates/<commit>.json`), so a rerun resumes; `OUT/tasks.jsonl` holds the kept rows and
`OUT/funnel.json` the funnel per repository (candidates -> environment built -> FAIL_TO_PASS found -> not
flaky -> statement kept -> kept) with the reason for every drop.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from verl_swe.concurrency import bounded_gather
from verl_swe.files import write_json_atomic, write_text_atomic
from verl_swe.mine.history import Candidate, MineError, commit_candidates, git, pr_candidates
from verl_swe.mine.statement import leaks, problem_statement
from verl_swe.mine.validate import TestRunError, find_tests
from verl_swe.tasks import EnvBuildError, Environments, RepoError, Task
from verl_swe.tasks.spec import DEFAULT_LOG_PARSER, DEFAULT_TEST_CMD

STAGES = ["candidates", "environment_built", "fail_to_pass_found", "not_flaky", "statement_kept", "kept"]


@dataclass
class MineOptions:
    repo: str  # a path or a git URL
    out: Path
    name: str | None = None  # owner/name (default: from the URL, or local/<folder>)
    since: str | None = None
    commits: str | None = None  # A..B
    prs: Path | None = None
    backend: str = "docker"
    cache_dir: Path | None = None
    repeats: int = 3
    workers: int = 2
    install: str | None = None  # default: pip install -e . (with the test extra when the project has one)
    test_cmd: str = DEFAULT_TEST_CMD
    timeout_s: float = 900.0
    judge: object | None = None  # a judge.JudgeConfig
    progress: bool = True


def repo_name(source: str, name: str | None) -> str:
    if name:
        if not re.fullmatch(r"[\w.-]+/[\w.-]+", name):
            raise MineError(f"--name must be owner/name, got {name!r}")
        return name
    m = re.search(r"[:/]([\w.-]+)/([\w.-]+?)(?:\.git)?/?$", source)
    if m and not Path(source).exists():
        return f"{m.group(1)}/{m.group(2)}"
    return f"local/{Path(source).resolve().name}"


def clone(source: str, dest: Path) -> Path:
    """The repository under OUT/repos (the grader's --repos-dir layout), cloned once; a rerun reuses it."""
    if (dest / ".git").exists() or (dest / "HEAD").exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["git", "clone", "-q", "--no-hardlinks", source, str(dest)], capture_output=True, text=True)
    if done.returncode:
        raise MineError(f"cannot clone {source}: {done.stderr.strip()[-500:]}")
    return dest


def install_line(repo: Path, commit: str) -> str:
    """`pip install -e .`, with the project's test extra when its metadata declares one."""
    extras: set[str] = set()
    try:
        project = tomllib.loads(git(repo, "show", f"{commit}:pyproject.toml")).get("project", {})
        extras |= set(project.get("optional-dependencies", {}))
    except (MineError, tomllib.TOMLDecodeError):
        pass
    try:
        cfg = git(repo, "show", f"{commit}:setup.cfg")
        section = re.search(r"^\[options\.extras_require\]\n((?:[ \t]*\S.*\n|[ \t]*\n)*)", cfg, re.M)
        extras |= set(re.findall(r"^([\w-]+)\s*=", section.group(1), re.M)) if section else set()
    except MineError:
        pass
    test_extra = next((e for e in ("test", "tests", "testing") if e in extras), None)
    return f'pip install -e ".[{test_extra}]"' if test_extra else "pip install -e ."


def base_row(c: Candidate, repo: Path, name: str, opts: MineOptions) -> dict:
    patch, test_patch = c.patches(repo)
    statement, source = problem_statement(c.subject, c.body, c.pr)
    return {
        "instance_id": f"{name.replace('/', '__')}-{c.short}", "repo": name, "base_commit": c.parent,
        "environment_setup_commit": c.parent, "patch": patch, "test_patch": test_patch,
        "problem_statement": statement, "hints_text": "", "created_at": c.created_at, "version": None,
        "FAIL_TO_PASS": [], "PASS_TO_PASS": [],
        "install_config": {"install": opts.install or install_line(repo, c.parent), "pip_packages": ["pytest"],
                           "test_cmd": opts.test_cmd, "log_parser": DEFAULT_LOG_PARSER},
        "meta": {"problem_statement_source": source, "commit": c.commit, "mined_by": "verl-swe mine",
                 **({"pr": c.pr.get("number")} if c.pr else {})},
    }


@dataclass
class Outcome:
    commit: str
    reached: str  # the last funnel stage passed
    drop: dict | None = None  # {stage, reason}
    row: dict | None = None
    tests: dict = field(default_factory=dict)
    seconds: float = 0.0


async def validate(c: Candidate, repo: Path, name: str, envs: Environments, opts: MineOptions) -> Outcome:
    start = time.monotonic()
    out = Outcome(c.commit, "candidates")

    def drop(stage: str, reason: str) -> Outcome:
        out.drop, out.seconds = {"stage": stage, "reason": reason}, round(time.monotonic() - start, 3)
        return out

    row = base_row(c, repo, name, opts)
    if "GIT binary patch" in row["patch"] or "GIT binary patch" in row["test_patch"]:
        return drop("environment_built", "the fix changes binary files")
    probe = Task.model_validate({**row, "FAIL_TO_PASS": ["?"]})
    try:
        await envs.prepare(probe)
    except (EnvBuildError, RepoError) as e:
        return drop("environment_built", f"environment: {str(e)[:600]}")
    out.reached = "environment_built"
    try:
        found = await find_tests(probe, envs, opts.repeats, opts.timeout_s)
    except TestRunError as e:
        return drop("fail_to_pass_found", str(e)[:600])
    out.tests = asdict(found)
    if not found.fail_to_pass and not found.flaky:
        return drop("fail_to_pass_found", "no test goes from failing to passing")
    out.reached = "fail_to_pass_found"
    if not found.fail_to_pass:
        return drop("not_flaky", f"every failing-to-passing test is flaky: {', '.join(found.flaky[:5])}")
    out.reached = "not_flaky"
    leaked = leaks(row["problem_statement"], row["patch"], row["test_patch"])
    if leaked:
        return drop("statement_kept", "the problem statement leaks the fix: " + "; ".join(leaked))
    out.reached = "statement_kept"
    row.update(FAIL_TO_PASS=found.fail_to_pass, PASS_TO_PASS=found.pass_to_pass)
    row["meta"]["flaky_tests"] = found.flaky
    Task.model_validate(row)  # what curate, evaluate and training will read
    out.reached, out.row, out.seconds = "kept", row, round(time.monotonic() - start, 3)
    return out


async def mine(opts: MineOptions) -> dict:
    """Mine one repository into `opts.out`; returns its funnel."""
    name = repo_name(opts.repo, opts.name)
    repo = clone(opts.repo, Path(opts.out) / "repos" / name.replace("/", "__"))
    if opts.prs:
        candidates, looked_at = pr_candidates(repo, opts.prs)
    else:
        candidates, looked_at = commit_candidates(repo, opts.since, opts.commits)
    done_dir = Path(opts.out) / "candidates"
    envs = Environments(opts.backend, repos_dir=Path(opts.out) / "repos", cache_dir=opts.cache_dir)

    async def one(c: Candidate) -> Outcome:
        saved = done_dir / f"{c.commit}.json"
        if saved.exists():  # resumed: this candidate's outcome is already known
            return Outcome(**json.loads(saved.read_text()))
        outcome = await validate(c, repo, name, envs, opts)
        write_json_atomic(saved, asdict(outcome))
        return outcome

    try:
        outcomes = await bounded_gather((one(c) for c in candidates), opts.workers,
                                        f"mining {name}" if opts.progress else None, unit="candidate")
    finally:
        envs.close()
    kept = [o.row for o in outcomes if o.row is not None]
    if opts.judge is not None:
        await judge_rows(kept, opts.judge, opts.workers)
    funnel = {"repo": name, "commits_looked_at": looked_at,
              **{stage: sum(STAGES.index(o.reached) >= i for o in outcomes) for i, stage in enumerate(STAGES)},
              "drops": [{"commit": o.commit, **o.drop} for o in outcomes if o.drop],
              "flaky_tests": sum(len(o.tests.get("flaky", [])) for o in outcomes),
              "seconds_per_candidate": round(sum(o.seconds for o in outcomes) / len(outcomes), 3) if outcomes else 0,
              "fail_to_pass_counts": [len(r["FAIL_TO_PASS"]) for r in kept]}
    write_text_atomic(Path(opts.out) / "tasks.jsonl", "".join(json.dumps(r) + "\n" for r in kept))
    write_json_atomic(Path(opts.out) / "funnel.json", funnel, indent=1)
    return funnel


async def judge_rows(rows: list[dict], cfg, workers: int) -> None:
    """Score each row in place (meta.llm_score) or say why not (meta.llm_score_error)."""
    import httpx

    from verl_swe.mine.judge import judge

    async with httpx.AsyncClient() as client:
        async def one(row: dict) -> None:
            score, error = await judge(row, cfg, client)
            row["meta"].pop("llm_score_error", None)
            if score is not None:
                row["meta"]["llm_score"] = score
            else:
                row["meta"]["llm_score_error"] = error

        await bounded_gather((one(r) for r in rows), workers)
