"""The sandbox rules for one task, cheapest first: environment, sanity (rule 5), correctness from the
pre-fix log (rule 1), determinism (rule 4). Every failure is a value, never an exception.

Sanity goes through the grader itself (`verl_swe.reward.grading.grade`, fresh sandboxes, the patch
guard), so a kept task is one the RL reward can score: gold resolves, the empty patch does not.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path

from verl_swe.curate.config import CurateConfig
from verl_swe.curate.determinism import SetupError, repeat_tests
from verl_swe.curate.rules import reference_errors
from verl_swe.reward.grading import GradeResult, grade
from verl_swe.sandbox.shell import SandboxError
from verl_swe.tasks.env_plan import EnvBuildError
from verl_swe.tasks.environment import Environments
from verl_swe.tasks.repos import RepoError
from verl_swe.tasks.schema import Task

logger = logging.getLogger(__name__)
CHECKS_FORMAT = 1  # bump when what a check computes changes, so cached results are not reused


@dataclass
class CheckResult:
    rule: str | None  # the rule that dropped the task; None when it passed every sandbox check
    reason: str = ""
    details: dict = field(default_factory=dict)

    @property
    def cacheable(self) -> bool:
        # An infrastructure failure says nothing about the task: check it again next time.
        return self.rule != "sandbox_error"

    def to_dict(self) -> dict:
        return asdict(self)


def check_key(task: Task, cfg: CurateConfig, backend: str) -> str:
    """What a cached check result depends on: the task row, the backend and the sandbox-rule settings."""
    ident = {"format": CHECKS_FORMAT, "task": task.model_dump(mode="json"), "backend": backend,
             "checks": cfg.checks.model_dump(mode="json", exclude={"enabled"}),
             "correctness": cfg.correctness.model_dump(mode="json", include={"error_types", "check_prepatch_log"})}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:24]


def _grade_summary(g: GradeResult) -> dict:
    status = g.tests_status or {}
    return {"resolved": g.resolved, "error": g.error, "dropped_files": g.dropped_files, "log": g.log_path,
            "failing": sorted(t for k in status for t in status[k]["failure"])}


def _infra(error: str | None) -> bool:
    return bool(error) and error.startswith("sandbox:")


async def check_task(task: Task, envs: Environments, cfg: CurateConfig, log_dir: Path) -> CheckResult:
    try:
        return await _check(task, envs, cfg, log_dir)
    except SandboxError as e:
        return CheckResult("sandbox_error", f"sandbox: {e}")
    except Exception as e:  # noqa: BLE001 - one task's surprise must not end a run over thousands
        logger.exception("checking %s failed", task.instance_id)
        return CheckResult("sandbox_error", f"{type(e).__name__}: {e}")


async def _check(task: Task, envs: Environments, cfg: CurateConfig, log_dir: Path) -> CheckResult:
    checks = cfg.checks
    try:
        sandbox_config = await envs.prepare(task)
    except (EnvBuildError, RepoError) as e:
        text = str(e).strip()
        return CheckResult("environment", text.splitlines()[0][:300] if text else type(e).__name__,
                           {"error": text[-3000:]})

    gold = await grade(task, task.patch, envs, timeout_s=checks.test_timeout_s, log_dir=log_dir / "gold")
    if _infra(gold.error):
        return CheckResult("sandbox_error", gold.error, {"gold": _grade_summary(gold)})
    if not gold.resolved:
        why = gold.error.splitlines()[0] if gold.error else f"failing: {', '.join(_grade_summary(gold)['failing'][:3])}"
        if gold.dropped_files:
            why += f" (the patch guard dropped {', '.join(gold.dropped_files)})"
        return CheckResult("sanity", f"the gold patch does not resolve the task: {why}", {"gold": _grade_summary(gold)})

    empty = await grade(task, "", envs, timeout_s=checks.test_timeout_s, log_dir=log_dir / "empty")
    details = {"gold": _grade_summary(gold), "empty": _grade_summary(empty)}
    if _infra(empty.error):
        return CheckResult("sandbox_error", empty.error, details)
    if empty.resolved:
        return CheckResult("sanity", "the empty patch already resolves the task", details)
    if empty.error and "timed out" in empty.error:
        # Every unresolved rollout would then cost the full timeout to grade.
        return CheckResult("sanity", f"without a fix the {empty.error}", details)

    if cfg.correctness.check_prepatch_log and empty.log_path:
        log = Path(empty.log_path).read_text(errors="replace")
        hits = reference_errors(log, task.FAIL_TO_PASS, cfg.correctness.error_types)
        if hits:
            test, line = next(iter(hits.items()))
            more = f" (and {len(hits) - 1} more)" if len(hits) > 1 else ""
            return CheckResult("correctness_log", f"before the fix {test} fails with a reference error{more}: "
                                                  f"{line}", {**details, "reference_errors": hits})

    if checks.runs:
        try:
            rep = await repeat_tests(task, sandbox_config, checks.runs, timeout_s=checks.test_timeout_s,
                                     stop_at_first_difference=checks.stop_at_first_difference)
        except SetupError as e:
            return CheckResult("determinism", f"repeat runs could not start: {str(e).splitlines()[0]}",
                               {**details, "error": str(e)})
        tests = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
        details["determinism"] = {"runs": len(rep.runs), "durations_s": rep.durations_s,
                                  "outcomes": [r.describe() for r in rep.runs],
                                  "flipped_tests": rep.flipped_tests(tests)}
        if not rep.consistent:
            return CheckResult("determinism", f"outcome varied: {rep.summary(tests)}", details)
        if not rep.runs[0].resolved:
            return CheckResult("determinism", f"gold resolved once but not in repeated runs: {rep.summary(tests)}",
                               details)
    return CheckResult(None, "", details)


class CheckCache:
    """Finished sandbox checks, one JSON line per task, appended as each finishes: an interrupted run
    resumes without redoing them. A torn last line (the process died mid-write) is ignored."""

    def __init__(self, path: Path, fresh: bool = False):
        self.path = Path(path)
        self.entries: dict[str, dict] = {}
        if fresh and self.path.exists():
            self.path.unlink()
        if self.path.exists():
            text = self.path.read_text()
            if text and not text.endswith("\n"):
                with self.path.open("a") as f:  # end the torn line, so the next entry starts its own
                    f.write("\n")
            for line in text.splitlines():
                try:
                    entry = json.loads(line)
                    self.entries[entry["key"]] = entry
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue

    def get(self, key: str) -> CheckResult | None:
        entry = self.entries.get(key)
        return CheckResult(**entry["result"]) if entry else None

    def put(self, key: str, instance_id: str, result: CheckResult) -> None:
        if not result.cacheable:
            return
        entry = {"key": key, "instance_id": instance_id, "result": result.to_dict()}
        self.entries[key] = entry
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()
