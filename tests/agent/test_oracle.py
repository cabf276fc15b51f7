"""The oracle policy solves every envs/mini task with the agent's own commands, on both backends."""

import asyncio

from verl_swe.agent.config import AgentConfig
from verl_swe.agent.llm import Sampling
from verl_swe.agent.oracle import _changes, hasty_replies, oracle_replies, OraclePolicy
from verl_swe.agent.runner import AgentRunner
from verl_swe.testing.tokenizer import qwen_tokenizer
from verl_swe.types import ExitStatus


def test_changes_are_the_minimal_line_runs():
    diff = ("diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -10,6 +10,7 @@ def f():\n a\n-b\n+B\n+B2\n c\n"
            "\n d\n-e\n")
    # line 11 ("b") becomes two lines; line 15 ("e") is deleted; context lines (a, c, blank, d) untouched
    assert _changes(diff) == [(11, 1, ["B", "B2"]), (15, 1, [])]


async def _play_all(plan, mini_tasks, task_envs, backend):
    cfg = AgentConfig(backend=backend, cache_dir=task_envs.store.cache_dir,
                      sandbox=task_envs.template.model_dump(exclude={"backend"}))
    runner = AgentRunner(cfg, qwen_tokenizer())
    try:
        async def one(task):
            policy = OraclePolicy(runner.chat.tok, runner.chat.end_of_turn_id, task, plan)
            return await runner.run(task, policy, Sampling(max_tokens=1024))

        return await asyncio.gather(*(one(t) for t in mini_tasks.values()))
    finally:
        runner.close()


async def test_oracle_resolves_every_mini_task(mini_tasks, task_envs, session_backend):
    results = await _play_all(oracle_replies, mini_tasks, task_envs, session_backend)
    for task, res in zip(mini_tasks.values(), results):
        t = res.trajectory
        assert t.exit_status == ExitStatus.SUBMITTED and t.resolved, (task.instance_id, t.error, t.patch)
        assert not any(turn.format_error for turn in t.turns)
        assert t.num_turns == len(oracle_replies(task))


async def test_the_hasty_demonstrator_submits_every_mini_task_unfixed(mini_tasks, task_envs, session_backend):
    """Well-formed failures: the learning run's start policy learns them as a choice, not as noise."""
    results = await _play_all(hasty_replies, mini_tasks, task_envs, session_backend)
    for task, res in zip(mini_tasks.values(), results):
        t = res.trajectory
        assert t.exit_status == ExitStatus.SUBMITTED and not t.resolved and not t.patch.strip(), task.instance_id
        assert not any(turn.format_error for turn in t.turns) and t.num_turns == 3
