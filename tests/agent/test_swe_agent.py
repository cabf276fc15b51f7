"""The SWE agent on real mini tasks in real sandboxes: an oracle script resolves, and faults end
episodes with the right status, reward and a closed sandbox. Trajectories land on disk as JSON."""

import json

import pytest

from verl_swe.agent.config import AgentConfig
from verl_swe.agent.llm import Sampling
from verl_swe.agent.runner import AgentRunner
from verl_swe.agent.trajectories import load_trajectories
from verl_swe.testing.scripted import ScriptedLLM
from verl_swe.testing.tokenizer import qwen_tokenizer
from verl_swe.types import ExitStatus

PAGER = "verl-swe-mini__pager-1"
ORACLE = [
    "Let me find it.\n```command\nsearch_file num_pages pager/paginator.py\n```",
    "```command\nopen pager/paginator.py 58\n```",
    "Off by one.\n```command\nedit 58:58 << 'EOF'\n        return (self.count + self.per_page - 1) // self.per_page\nEOF\n```",
    "```command\npython -m pytest -q tests 2>&1 | tail -3\n```",
    "```command\nsubmit\n```",
]


@pytest.fixture
def runner(task_envs, session_backend, tmp_path):
    cfg = AgentConfig(backend=session_backend, cache_dir=task_envs.store.cache_dir,
                      sandbox=task_envs.template.model_dump(exclude={"backend"}), trajectory_dir=tmp_path / "run",
                      command_timeout_s=20)
    r = AgentRunner(cfg, qwen_tokenizer())
    yield r
    r.close()


async def play(runner, task, replies, **cfg):
    if cfg:
        runner.config = runner.config.model_copy(update=cfg)
    llm = ScriptedLLM(runner.chat.tok, runner.chat.end_of_turn_id, replies)
    return await runner.run(task, llm, Sampling(max_tokens=512))


async def test_oracle_resolves_and_the_trajectory_is_saved(runner, mini_tasks, tmp_path):
    res = await play(runner, mini_tasks[PAGER], ORACLE)
    t = res.trajectory
    assert t.exit_status == ExitStatus.SUBMITTED and t.resolved and t.reward == 1.0, t.error
    assert "11 passed" in t.turns[3].observation  # the agent ran the repository's tests itself
    assert t.messages[3]["content"].endswith("(Current directory: /testbed, current file: n/a) bash-$")
    assert "-        return (self.count + self.per_page) // self.per_page" in t.patch
    assert t.grade["tests_status"]["FAIL_TO_PASS"]["failure"] == []
    [saved] = list(load_trajectories(tmp_path / "run"))
    assert saved == t and json.loads((tmp_path / "run" / "trajectories" / PAGER / f"{t.episode_id}.json").read_text())


async def test_submitting_nothing_is_unresolved(runner, mini_tasks):
    res = await play(runner, mini_tasks[PAGER], ["```command\nsubmit\n```"])
    t = res.trajectory
    assert t.exit_status == ExitStatus.SUBMITTED and not t.resolved and t.reward == 0.0 and t.patch == ""
    assert t.grade["tests_status"]["FAIL_TO_PASS"]["failure"]


async def test_an_agent_that_kills_its_sandbox(runner, mini_tasks):
    res = await play(runner, mini_tasks[PAGER], ["```command\nkill -9 $PPID; sleep 1\n```", "```command\nsubmit\n```"])
    t = res.trajectory
    assert t.exit_status == ExitStatus.SANDBOX_ERROR and "sandbox" in t.error and t.reward == 0.0


async def test_a_grader_failure_is_an_unresolved_value(runner, mini_tasks):
    res = await play(runner, mini_tasks[PAGER], ORACLE, grade_timeout_s=0.001)
    t = res.trajectory
    assert t.exit_status == ExitStatus.SUBMITTED and not t.resolved and "timed out" in t.error
