"""`verl-swe view`: a static HTML site over a run directory's trajectories (no server; open index.html).

    site/index.html        the page, site/viewer.js its code (no external resources; a CSP allows no inline script)
    site/data/index.js     the list: one row per trajectory, the run's report if any, unreadable files
    site/data/t/<n>.js     one trajectory, loaded when opened (a <script> tag, so file:// works)

Everything from a trajectory is untrusted model output: it is written as JSON with every non-ASCII and
`<`, `>`, `&` escaped, and the page inserts it with `textContent` only, never as HTML.
"""

from __future__ import annotations

import json
import re
import shutil
from importlib import resources
from pathlib import Path

from verl_swe.eval.runs import LoadError, read_run, repo_of, run_index
from verl_swe.files import write_text_atomic
from verl_swe.types import Trajectory

# The action block of each tool set (verl_swe/tools/parsing.py): the rest of a turn is its reasoning.
_ACTION_BLOCK = re.compile(r"```command[ \t]*\n.*?(?:```|$)|<tool_call>.*?(?:</tool_call>|$)", re.S)


def reasoning_of(assistant: str) -> str:
    return _ACTION_BLOCK.sub("", assistant).strip()


def _js(name: str, value) -> str:
    # ensure_ascii escapes U+2028/2029 too; <, >, & are escaped so the text can never close a tag.
    text = json.dumps(value, ensure_ascii=True)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f"{name}{text});\n" if name.endswith("(") else f"{name} = {text};\n"


def _row(n: int, traj: Trajectory, path: Path, run_dir: Path) -> dict:
    return {
        "id": n, "instance_id": traj.instance_id, "episode_id": traj.episode_id, "repo": repo_of(traj.instance_id),
        "run": run_index(traj), "resolved": traj.resolved,
        "exit_status": traj.exit_status.value if traj.exit_status else "unknown", "turns": traj.num_turns,
        "reward": round(traj.reward, 4), "generated_tokens": traj.generated_tokens,
        "context_tokens": traj.prompt_tokens + traj.response_tokens,
        "patch_lines": traj.patch.count("\n"), "error": traj.error or "", "file": str(path.relative_to(run_dir)),
        "hack": sorted(f for f, evidence in traj.hack_flags.items() if evidence), "hack_zeroed": traj.hack_zeroed,
        "step": traj.metadata.get("policy_version"),  # RL trajectories: the weights' step (agent/runner.py)
    }


def step_summary(rows: list[dict]) -> list[dict]:
    """A training run's learning, per policy step: episodes, mean reward, resolve rate, share ended by format
    errors, mean turns (over the trajectories on disk that carry a step)."""
    by_step: dict[int, list[dict]] = {}
    for r in rows:
        if r["step"] is not None:
            by_step.setdefault(int(r["step"]), []).append(r)

    def mean(xs) -> float:
        return round(sum(xs) / len(xs), 4)

    return [{"step": step, "episodes": len(rs), "reward": mean([r["reward"] for r in rs]),
             "resolved": mean([float(r["resolved"]) for r in rs]),
             "format_errors": mean([float(r["exit_status"] == "format_errors") for r in rs]),
             "turns": mean([r["turns"] for r in rs])} for step, rs in sorted(by_step.items())]


def _detail(traj: Trajectory, row: dict) -> dict:
    task = next((m.get("content", "") for m in traj.messages if m.get("role") == "user"), "")
    system = next((m.get("content", "") for m in traj.messages if m.get("role") == "system"), "")
    turns = [{
        "index": t.index, "reasoning": reasoning_of(t.assistant), "assistant": t.assistant,
        "tool": t.action.tool if t.action else None, "command": t.action.text if t.action else None,
        "observation": t.observation, "format_error": t.format_error, "generated_tokens": t.generated_tokens,
        "observation_tokens": t.observation_tokens, "stop_reason": t.stop_reason,
        "generation_s": t.generation_s, "tool_s": t.tool_s,
    } for t in traj.turns]
    return {**row, "task": task, "system": system, "turns": turns, "patch": traj.patch, "grade": traj.grade,
            "turn_penalty": traj.turn_penalty, "prompt_tokens": traj.prompt_tokens,
            "response_tokens": traj.response_tokens, "timings": traj.timings, "metadata": traj.metadata,
            "hack_flags": traj.hack_flags}


def build_site(run_dir: Path, out: Path | None = None, repos: dict[str, str] | None = None) -> Path:
    """Write the viewer for `run_dir` into `out` (default RUN_DIR/site); returns index.html. Unreadable
    trajectory files are listed on the page (and returned in the index) while the rest are shown."""
    run_dir = Path(run_dir)
    run = read_run(run_dir)
    out = Path(out) if out is not None else run_dir / "site"
    data_dir = out / "data"
    if (data_dir / "t").exists():
        shutil.rmtree(data_dir / "t")  # a rebuild must not leave trajectories of an older listing
    rows = []
    for n, (traj, path) in enumerate(zip(run.trajectories, run.paths, strict=True)):
        row = _row(n, traj, path, run_dir)
        if repos and traj.instance_id in repos:
            row["repo"] = repos[traj.instance_id]
        rows.append(row)
        write_text_atomic(data_dir / "t" / f"{n}.js", _js("VERL_SWE_TRAJ(", _detail(traj, row)))
    report_path = run_dir / "report.json"
    report = None
    if report_path.is_file():
        try:
            report = json.loads(report_path.read_text())
        except ValueError as e:
            run.errors.append(LoadError(report_path, f"{type(e).__name__}: {e}"))
    index = {"run_dir": str(run_dir), "rows": rows, "errors": [{"path": str(e.path), "reason": e.reason}
                                                                for e in run.errors], "report": report,
             "steps": step_summary(rows)}
    write_text_atomic(data_dir / "index.js", _js("window.VERL_SWE_INDEX", index))
    assets = resources.files("verl_swe.eval")
    write_text_atomic(out / "viewer.js", assets.joinpath("viewer.js").read_text(encoding="utf-8"))
    return write_text_atomic(out / "index.html", assets.joinpath("viewer.html").read_text(encoding="utf-8"))

