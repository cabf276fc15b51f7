"""Run directories as `verl-swe rollout` writes them (trajectories saved by the agent's own writer), with a
resolution matrix chosen per test, and model output that tries to become markup."""

from __future__ import annotations

import pytest

from verl_swe.agent.trajectories import save_trajectory
from verl_swe.types import Action, ExitStatus, Trajectory, Turn

HOSTILE = '</script><script>document.title="pwned"</script><img src=x onerror="document.title=\'pwned\'">'


def make_trajectory(instance_id: str, run: int, resolved: bool, status: ExitStatus = ExitStatus.SUBMITTED,
                    graded: bool = True) -> Trajectory:
    turns = [
        Turn(0, f"I should look at the code. {HOSTILE}\n```command\ngrep -rn 'def parse' src\n```",
             Action("bash", {"command": "grep -rn 'def parse' src"}, "grep -rn 'def parse' src"),
             f"src/app.py:3:def parse(x):  {HOSTILE}", generated_tokens=31, observation_tokens=17,
             stop_reason="stop", generation_s=0.5, tool_s=0.1),
        Turn(1, "The format is wrong here", None, "No command found.", format_error=True, generated_tokens=5,
             observation_tokens=9, stop_reason="stop"),
        Turn(2, "Done.\n```command\nsubmit\n```", Action("submit", {}, "submit"), "Submitted.", generated_tokens=8,
             stop_reason="stop"),
    ]
    patch = (f"diff --git a/src/app.py b/src/app.py\n--- a/src/app.py\n+++ b/src/app.py\n@@ -3 +3 @@\n"
             f"-old {run}\n+new {run}\n")
    grade = {"instance_id": instance_id, "resolved": resolved, "patch_applied": True, "test_exit_code": 0,
             "tests_status": {"FAIL_TO_PASS": {"success": ["tests/test_app.py::test_parse"] if resolved else [],
                                               "failure": [] if resolved else ["tests/test_app.py::test_parse"]},
                              "PASS_TO_PASS": {"success": ["tests/test_app.py::test_other"], "failure": []}},
             "error": None, "dropped_files": {}, "log_path": None} if graded else None
    return Trajectory(instance_id=instance_id, episode_id=f"{instance_id}.{run}",
                      messages=[{"role": "system", "content": "You are an agent."},
                                {"role": "user", "content": f"Fix the parser. {HOSTILE}"}],
                      turns=turns, exit_status=status, patch=patch, reward=float(resolved), resolved=resolved,
                      grade=grade, prompt_tokens=100, response_tokens=70, generated_tokens=44,
                      timings={"total_s": 3.0})


@pytest.fixture
def make_run(tmp_path):
    """make_run({instance_id: [resolved in run 0, run 1, ...]}) -> the run directory."""

    def make(matrix: dict[str, list[bool]], statuses: dict[tuple[str, int], ExitStatus] | None = None):
        run_dir = tmp_path / "run"
        for iid, results in matrix.items():
            for r, ok in enumerate(results):
                status = (statuses or {}).get((iid, r), ExitStatus.SUBMITTED)
                save_trajectory(run_dir, make_trajectory(iid, r, ok, status, graded=status == ExitStatus.SUBMITTED))
        return run_dir

    return make
