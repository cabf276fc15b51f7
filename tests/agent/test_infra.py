"""Infrastructure failures apart from the agent's: marked with their kind, retried when transient, never
counted as the agent's outcome; the environment is prepared outside the episode's clock; a cancelled
episode is saved, marked, and redone by a resumed run."""

from __future__ import annotations

import asyncio

import pytest

from verl_swe.agent.config import AgentConfig, LimitsConfig, PlacementConfig
from verl_swe.agent.env import AgentEnv, Outcome, Step
from verl_swe.agent.episode import EpisodeLimits, run_episode
from verl_swe.agent.infra import ENV_BUILD, HOST_LOST, INTERNAL, PREPARE_TIMEOUT, InfraFailure, infra_kind
from verl_swe.agent.llm import Sampling
from verl_swe.agent.rollout import rollout
from verl_swe.agent.runner import AgentRunner
from verl_swe.agent.tokens import ChatTokens
from verl_swe.agent.trajectories import load_trajectories, save_trajectory
from verl_swe.eval.metrics import batch_metrics, episode_metrics
from verl_swe.sandbox.shell import SandboxDied, SandboxError, SandboxFileError, SandboxStartError
from verl_swe.tasks import Task
from verl_swe.testing.envs import ScriptedEnv
from verl_swe.testing.scripted import ScriptedLLM, TurnScriptedLLM
from verl_swe.testing.tokenizer import qwen_tokenizer
from verl_swe.tools import get_tool_set
from verl_swe.types import ExitStatus, Trajectory

LS = "```command\nls\n```"
SUBMIT = "Done.\n```command\nsubmit\n```"


@pytest.fixture(scope="module")
def chat():
    return ChatTokens(qwen_tokenizer())


async def episode(chat, env, replies=(LS, SUBMIT), prepare_timeout_s=None, **limits):
    llm = ScriptedLLM(chat.tok, chat.end_of_turn_id, list(replies), repeat_last=True)
    res = await run_episode(env, get_tool_set("paper"), llm, chat, "sys", EpisodeLimits(**limits),
                            Sampling(max_tokens=256), "t-1", prepare_timeout_s=prepare_timeout_s)
    return res.trajectory


def test_what_counts_as_infrastructure():
    assert infra_kind(InfraFailure(ENV_BUILD, "x")) == ENV_BUILD
    assert infra_kind(SandboxStartError("engine busy")) == "sandbox_start"
    assert infra_kind(SandboxDied("gone", cause="host_lost")) == HOST_LOST
    assert infra_kind(SandboxDied("gone", cause="removed")) == "sandbox_lost"
    assert infra_kind(SandboxDied("gone", cause="killed")) == "sandbox_lost"
    # Anything the sandbox's own processes could have done is the agent's: it must not be able to turn a
    # failing episode into an excluded one by killing or exhausting its sandbox.
    for agent in (SandboxDied("gone"), SandboxDied("gone", cause="exited"), SandboxDied("gone", cause="oom"),
                  SandboxFileError("no", "reason"), SandboxError("misused"), RuntimeError("tool bug")):
        assert infra_kind(agent) is None, agent


async def test_the_environment_is_prepared_outside_the_episodes_clock(chat):
    class SlowToBuild(ScriptedEnv):
        async def prepare(self):
            await asyncio.sleep(0.6)  # longer than the episode may take

    t = await episode(chat, SlowToBuild(), timeout_s=0.4)
    assert t.exit_status == ExitStatus.SUBMITTED and t.infra_failure is None
    assert t.timings["prepare_s"] >= 0.6 and t.cost["prepare_s"] == t.timings["prepare_s"]


async def test_infrastructure_failures_are_marked_with_their_kind(chat):
    class BuildFails(ScriptedEnv):
        async def prepare(self):
            raise InfraFailure(ENV_BUILD, "pip could not install x")

    class NeverReady(ScriptedEnv):
        async def prepare(self):
            await asyncio.sleep(30)

    class NodeLost(ScriptedEnv):
        async def step(self, action):
            raise SandboxDied("sandbox host lost", cause="host_lost")

    class OurBug(ScriptedEnv):
        async def start(self):
            raise KeyError("a bug of ours, before the agent acted")

    for env, kind in ((BuildFails(), ENV_BUILD), (NeverReady(), PREPARE_TIMEOUT), (NodeLost(), HOST_LOST),
                      (OurBug(), INTERNAL)):
        t = await episode(chat, env, prepare_timeout_s=0.3)
        assert t.exit_status == ExitStatus.SANDBOX_ERROR and t.infra_failure == kind and not t.settled, (kind, t.error)
        assert env.closed >= 1 and env.finished_with is None


async def test_failures_of_the_agents_doing_stay_its_own(chat):
    class KillsItsSandbox(ScriptedEnv):
        async def step(self, action):
            raise SandboxDied("the shell's supervisor was killed", cause="exited")

    class ToolBreaks(ScriptedEnv):
        async def step(self, action):
            raise ValueError("an action our tool could not handle")

    for env in (KillsItsSandbox(), ToolBreaks()):
        t = await episode(chat, env)
        assert t.exit_status == ExitStatus.SANDBOX_ERROR and t.infra_failure is None and t.settled
    t = await episode(chat, ScriptedEnv(), replies=["no command here"], max_format_errors=2)
    assert t.exit_status == ExitStatus.FORMAT_ERRORS and t.infra_failure is None


async def test_a_grading_infrastructure_failure_is_marked(chat):
    class GraderEnvFails(ScriptedEnv):
        async def finish(self, submitted):
            return Outcome(patch="diff", error="grading: environment: base image missing", infra="grading")

    t = await episode(chat, GraderEnvFails())
    assert t.exit_status == ExitStatus.SUBMITTED and t.infra_failure == "grading" and not t.resolved


class FlakyEnv(AgentEnv):
    """Its first `fails` preparations lose their node; then it is a trivial task the agent submits."""

    fails = 0
    prepared = 0

    @classmethod
    def from_row(cls, row, environments, **options):
        return cls()

    async def prepare(self):
        FlakyEnv.prepared += 1
        if FlakyEnv.fails > 0:
            FlakyEnv.fails -= 1
            raise SandboxDied("sandbox host lost: node died", cause="host_lost")

    async def start(self):
        return "Say done."

    async def step(self, action):
        if action.tool == "submit":
            return Step("Submitted.", done=True)
        return Step(f"ran {action.text}")

    async def finish(self, submitted):
        return Outcome(resolved=submitted, patch="diff")

    async def close(self):
        pass


class HangingEnv(FlakyEnv):
    async def step(self, action):
        await asyncio.sleep(3600)


TASK = Task(instance_id="w-1", repo="o/r", base_commit="0" * 40, problem_statement="x", test_patch="",
            FAIL_TO_PASS=["t"])


def runner_for(tmp_path, env: str, retries: int = 1) -> AgentRunner:
    cfg = AgentConfig(env=f"tests.agent.test_infra:{env}", backend="local", cache_dir=tmp_path / "cache",
                      trajectory_dir=tmp_path / "run", limits=LimitsConfig(max_turns=5, penalty_threshold=2),
                      placement=PlacementConfig(episode_retries=retries))
    return AgentRunner(cfg, qwen_tokenizer())


async def test_a_transient_infra_failure_runs_the_episode_again(tmp_path):
    runner = runner_for(tmp_path, "FlakyEnv", retries=1)
    llm = TurnScriptedLLM(runner.chat.tok, runner.chat.end_of_turn_id, [LS, SUBMIT])
    task = TASK
    FlakyEnv.fails, FlakyEnv.prepared = 1, 0
    res = await runner.run(task, llm, Sampling(max_tokens=64), episode_id="w-1.0")
    t = res.trajectory
    assert FlakyEnv.prepared == 2 and t.exit_status == ExitStatus.SUBMITTED and t.resolved and t.settled
    assert [a["infra_failure"] for a in t.metadata["infra_attempts"]] == [HOST_LOST]
    assert [x.episode_id for x in load_trajectories(tmp_path / "run")] == ["w-1.0"]  # once: the last attempt
    assert episode_metrics(t)["swe/infra/retries"] == 1.0 and episode_metrics(t)["swe/infra/failed"] == 0.0

    FlakyEnv.fails = 2  # fails again on its retry: returned marked, saved, and not counted as the agent's
    t = (await runner.run(task, llm, Sampling(max_tokens=64), episode_id="w-1.1")).trajectory
    assert t.infra_failure == HOST_LOST and len(t.metadata["infra_attempts"]) == 1
    assert [x.episode_id for x in load_trajectories(tmp_path / "run")] == ["w-1.0"]
    assert len(list(load_trajectories(tmp_path / "run", unsettled=True))) == 2
    runner.close()


async def test_a_cancelled_episode_is_saved_marked_and_a_resumed_rollout_redoes_it(tmp_path):
    runner = runner_for(tmp_path, "HangingEnv")
    llm = TurnScriptedLLM(runner.chat.tok, runner.chat.end_of_turn_id, [LS, SUBMIT])
    task = TASK
    FlakyEnv.fails = 0
    job = asyncio.ensure_future(runner.run(task, llm, Sampling(max_tokens=64), episode_id="w-1.0"))
    await asyncio.sleep(0.5)
    job.cancel()
    with pytest.raises(asyncio.CancelledError):
        await job
    [saved] = load_trajectories(tmp_path / "run", unsettled=True)
    assert saved.exit_status == ExitStatus.CANCELLED and not saved.settled and saved.num_turns == 1
    assert "cancelled" in saved.error and saved.metadata["tool_set"] == "paper"
    assert list(load_trajectories(tmp_path / "run")) == []  # counted nowhere

    runner.config = runner.config.model_copy(update={"env": "tests.agent.test_infra:FlakyEnv"})
    summary = await rollout([task], runner, llm, Sampling(max_tokens=64), 1, tmp_path / "run", workers=1)
    assert summary["episodes"] == 1 and summary["per_task"]["w-1"]["exit_status"] == {"submitted": 1}
    [redone] = load_trajectories(tmp_path / "run", unsettled=True)  # the same file, now the agent's outcome
    assert redone.episode_id == "w-1.0" and redone.settled
    runner.close()


def test_infra_failures_count_in_swe_infra_and_in_no_policy_mean():
    ok = Trajectory("t", "a", exit_status=ExitStatus.SUBMITTED, resolved=True, reward=1.0,
                    cost={"sandbox_cpu_s": 2.0, "wall_s": 10.0})
    lost = Trajectory("t", "b", exit_status=ExitStatus.SANDBOX_ERROR, infra_failure=HOST_LOST,
                      cost={"sandbox_cpu_s": 1.0, "wall_s": 4.0})
    m = batch_metrics([episode_metrics(ok), episode_metrics(lost)])
    assert m["swe/resolved"] == 1.0 and m["swe/reward"] == 1.0 and m["swe/exit/sandbox_error"] == 0.0
    assert m["swe/infra/failed"] == 0.5 and m["swe/infra/host_lost"] == 0.5
    assert m["swe/cost/sandbox_cpu_s"] == 1.5 and m["swe/cost/wall_s"] == 7.0 and m["swe/episodes"] == 2.0


def test_old_trajectory_files_still_load(tmp_path):
    t = Trajectory("t", "a", exit_status=ExitStatus.SUBMITTED)
    d = t.to_dict()
    del d["infra_failure"], d["cost"]  # written before these fields existed
    assert Trajectory.from_dict(d).settled
    save_trajectory(tmp_path, Trajectory.from_dict(d))
    assert [x.episode_id for x in load_trajectories(tmp_path)] == ["a"]
