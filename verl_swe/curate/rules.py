"""The curation rules that read only the task row (and, for correctness, a test log): pure functions.

Each returns a `Drop` (rule name, a one-line reason a person can act on, details) or None. The rules
are the paper's data pipeline (P1 Sec. 4.1, paper.md 1.7); the sandbox rules live in `checks.py`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import date

from verl_swe.curate.config import ComplexityConfig, CorrectnessConfig, CurateConfig, QualityConfig
from verl_swe.curate.decontam import Exclusions
from verl_swe.tasks.patches import split_patch
from verl_swe.tasks.schema import Task

# Every rule in the order the pipeline applies it, cheapest first: the funnel reports them in this order.
RULES: dict[str, str] = {
    "malformed": "not a valid task row, a duplicate, or no gold patch",
    "correctness_metadata": "metadata says the tests fail from invalid references or imports (rule 1)",
    "complexity": "gold patch touches too many files or lines (rule 2)",
    "quality": "LLM-assessed quality score of 3 (rule 3)",
    "decontamination": "overlaps an evaluation set (rule 6)",
    "environment": "the task's environment does not build",
    "sandbox_error": "the sandbox failed (infrastructure; retried on the next run)",
    "sanity": "gold does not resolve, or the empty patch does (rule 5)",
    "correctness_log": "before the fix, FAIL_TO_PASS tests fail from invalid references or imports (rule 1)",
    "determinism": "test outcome varies over repeated runs with the gold patch (rule 4)",
}
SANDBOX_RULES = ("environment", "sandbox_error", "sanity", "correctness_log", "determinism")
QUALITY_MEANING = {"issue_text_score": "unclear issue", "difficulty_score": "overly complex task",
                   "test_score": "flawed test patch"}


@dataclass(frozen=True)
class Drop:
    rule: str
    reason: str
    details: dict = field(default_factory=dict)


def patch_stats(patch: str) -> tuple[int, int]:
    """(files touched, lines added + removed) of a unified diff."""
    diffs = split_patch(patch)
    lines = 0
    for d in diffs:
        in_hunk = False
        for line in d.text.splitlines():
            if line.startswith("@@"):
                in_hunk = True
            elif in_hunk and line.startswith(("+", "-")):
                lines += 1
    return len({d.new_path or d.old_path for d in diffs}), lines


def _json_field(value):
    # SWE-rebench parquet exports store nested meta fields as JSON strings in some versions.
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def check_gold(task: Task) -> Drop | None:
    if not task.patch.strip():
        return Drop("malformed", "no gold patch: curation and RFT need one to check the task")
    return None


def check_correctness_metadata(task: Task, cfg: CorrectnessConfig) -> Drop | None:
    failed = _json_field(task.meta.get("failed_lite_validators")) or []
    failed = [failed] if isinstance(failed, str) else list(failed)
    hits = [v for v in failed if v in cfg.meta_validators]
    if hits:
        return Drop("correctness_metadata", f"meta.failed_lite_validators has {', '.join(hits)}", {"validators": hits})
    return None


def check_complexity(task: Task, cfg: ComplexityConfig) -> Drop | None:
    files, lines = patch_stats(task.patch)
    details = {"files": files, "lines": lines}
    if files > cfg.max_files:
        return Drop("complexity", f"gold patch touches {files} files (max {cfg.max_files})", details)
    if lines > cfg.max_lines:
        return Drop("complexity", f"gold patch changes {lines} lines (max {cfg.max_lines})", details)
    return None


def check_quality(task: Task, cfg: QualityConfig) -> Drop | None:
    score = _json_field(task.meta.get("llm_score"))
    if score is None:
        return Drop("quality", "no meta.llm_score (quality.drop_missing is set)") if cfg.drop_missing else None
    if not isinstance(score, dict):
        return Drop("quality", f"meta.llm_score is not a mapping of sub-scores: {score!r:.80}")
    high = {}
    for name in cfg.fields:
        value = score.get(name)
        if value is None:
            continue
        try:
            value = float(value)
        except (TypeError, ValueError):
            return Drop("quality", f"meta.llm_score.{name} is not a number: {value!r:.80}")
        if value >= cfg.drop_at:
            high[name] = value
    if high:
        said = ", ".join(f"{k}={v:g} ({QUALITY_MEANING.get(k, 'LLM score')})" for k, v in high.items())
        return Drop("quality", f"meta.llm_score {said}", {"llm_score": score})
    return None


def check_decontamination(task: Task, ex: Exclusions) -> Drop | None:
    if task.instance_id in ex.instances:
        return Drop("decontamination", f"instance id is in {ex.instances[task.instance_id]}")
    if task.repo in ex.repos:
        return Drop("decontamination", f"repository {task.repo} is in {ex.repos[task.repo]}")
    if ex.created_from is not None:
        try:
            created = date.fromisoformat((task.created_at or "")[:10])
        except ValueError:
            return Drop("decontamination", f"created_at {task.created_at!r} is not a date, so the task cannot be "
                                           f"shown to predate {ex.created_from}")
        if created >= ex.created_from:
            return Drop("decontamination", f"created {created} is on or after the held-out cut-off {ex.created_from}")
    return None


def check_metadata(task: Task, cfg: CurateConfig, ex: Exclusions) -> Drop | None:
    """The first rule (in `RULES` order) that drops `task` without running anything, or None."""
    return (check_gold(task) or check_correctness_metadata(task, cfg.correctness)
            or check_complexity(task, cfg.complexity) or check_quality(task, cfg.quality)
            or check_decontamination(task, ex))


_SUMMARY = re.compile(r"^(?:FAILED|ERROR) (\S+) - (.*)$")
_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$")


def _sections(log: str) -> dict[str, str]:
    """pytest's failure and error sections: title ("test_x", "Class.test_x[p]", "ERROR collecting path")
    -> body."""
    out: dict[str, list[str]] = {}
    current = None
    for line in log.splitlines():
        m = _SECTION.match(line)
        if m:
            current = out.setdefault(m.group(1), [])
        elif line.startswith("====="):
            current = None
        elif current is not None:
            current.append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def reference_errors(log: str, fail_to_pass: list[str], error_types: list[str]) -> dict[str, str]:
    """FAIL_TO_PASS test -> the line showing that, before the fix, it fails from a reference error.

    Reads pytest's output as SWE-rebench's test commands print it (`-rA`): summary lines ("FAILED
    path::test - AttributeError: ..."), a test's own failure section, and "ERROR collecting path" sections,
    where a module that does not import stops its tests (or the whole run) before they exist.
    """
    if not error_types:
        return {}
    kinds = "|".join(map(re.escape, error_types))
    in_message = re.compile(rf"\b({kinds})\b")
    raised = re.compile(rf"^E\s+(?:\w+\.)*({kinds})\b.*$", re.M)
    sections = _sections(log)
    summary = [(m.group(1), line.strip()) for line in log.splitlines()
               if (m := _SUMMARY.match(line.strip())) and in_message.search(m.group(2))]
    hits: dict[str, str] = {}
    for test in fail_to_pass:
        path, _, name = test.partition("::")
        for target, line in summary:
            if test == target or test.startswith(target + "::"):
                hits[test] = line[:300]
                break
        else:
            for title in (name.replace("::", "."), f"ERROR collecting {path}", f"ERROR at setup of {name}"):
                m = raised.search(sections.get(title, ""))
                if m:
                    hits[test] = f"{title}: {m.group(0).lstrip('E').strip()}"[:300]
                    break
        if test not in hits:  # a collection error elsewhere interrupts the run before this test exists
            for title, body in sections.items():
                m = raised.search(body) if title.startswith("ERROR collecting ") else None
                if m and "Interrupted:" in log and not _ran(log, test):
                    hits[test] = f"{title}: {m.group(0).lstrip('E').strip()}"[:300]
                    break
    return hits


def _ran(log: str, test: str) -> bool:
    return re.search(rf"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) {re.escape(test)}\b", log, re.M) is not None
