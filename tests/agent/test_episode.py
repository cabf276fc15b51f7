"""Every way an episode can end, with a scripted model and environment: the right exit status, the
reward of P1 Eq. 3-4, the environment closed, and nothing raised (except a cancellation, re-raised)."""

import asyncio

import pytest

from verl_swe.agent.episode import EpisodeLimits, run_episode
from verl_swe.agent.llm import ModelError, Sampling
from verl_swe.agent.tokens import ChatTokens
from verl_swe.eval.metrics import episode_metrics
from verl_swe.reward.turn_penalty import final_reward, turn_penalty
from verl_swe.sandbox.shell import SandboxDied
from verl_swe.testing.envs import ScriptedEnv
from verl_swe.testing.scripted import ScriptedLLM
from verl_swe.testing.tokenizer import qwen_tokenizer
from verl_swe.tools import get_tool_set
from verl_swe.tools.parsing import MAX_ACTION_CHARS
from verl_swe.types import ExitStatus

LS = "```command\nls\n```"
SUBMIT = "Done.\n```command\nsubmit\n```"


@pytest.fixture(scope="module")
def chat():
    return ChatTokens(qwen_tokenizer())


async def episode(chat, replies, env=None, stop=True, **limits):
    llm = ScriptedLLM(chat.tok, chat.end_of_turn_id, replies, stop=stop, repeat_last=True)
    env = env or ScriptedEnv()
    res = await run_episode(env, get_tool_set("paper"), llm, chat, "sys", EpisodeLimits(**limits),
                            Sampling(max_tokens=limits.get("max_new_tokens", 4096)), "t-1")
    return res, env, llm


def test_turn_penalty_eq4():
    # L_thr = 10: no penalty below 10 turns, then linear to -1 at T_max (P1 Eq. 4).
    assert turn_penalty(9, 40) == 0.0 and turn_penalty(10, 40) == 0.0
    assert turn_penalty(25, 40) == pytest.approx(-0.5) and turn_penalty(40, 40) == pytest.approx(-1.0)
    assert turn_penalty(45, 80) == pytest.approx(-0.5)  # stage 2: -(45-10)/70
    assert final_reward(True, 25, 40) == pytest.approx(0.5) and final_reward(False, 40, 40) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="must exceed"):
        turn_penalty(5, 10, 10)


async def test_submitted(chat):
    res, env, _ = await episode(chat, [LS, SUBMIT])
    t = res.trajectory
    assert t.exit_status == ExitStatus.SUBMITTED and t.resolved and t.reward == 1.0 and env.closed == 1
    assert [turn.action.tool for turn in t.turns] == ["bash", "submit"] and env.finished_with is True
    assert res.trajectory.exit_status == ExitStatus.SUBMITTED and res.trajectory.num_turns == 2


async def test_max_turns_gets_the_full_penalty(chat):
    res, env, _ = await episode(chat, [LS], max_turns=12)
    t = res.trajectory
    assert t.exit_status == ExitStatus.MAX_TURNS and t.num_turns == 12 and not t.resolved
    assert t.reward == pytest.approx(-1.0) and env.closed == 1 and env.finished_with is False


async def test_format_errors_are_observations_then_an_exit(chat):
    bad = ["no command here", "```command\nls\n```\n```command\npwd\n```", "```command\nls"]
    res, env, _ = await episode(chat, bad + [LS, SUBMIT])
    t = res.trajectory
    assert t.exit_status == ExitStatus.SUBMITTED
    assert [turn.format_error for turn in t.turns] == [True, True, True, False, False]
    assert "No command found" in t.turns[0].observation and "2 command blocks" in t.turns[1].observation
    assert "not closed" in t.turns[2].observation and env.steps == 2  # malformed turns never reach the env
    res, env, _ = await episode(chat, ["just talk"], max_format_errors=3)
    assert res.trajectory.exit_status == ExitStatus.FORMAT_ERRORS and res.trajectory.num_turns == 3


async def test_huge_action_is_a_format_error(chat):
    huge = "```command\necho " + "x" * (MAX_ACTION_CHARS + 10) + "\n```"
    res, _, _ = await episode(chat, [huge, SUBMIT], max_new_tokens=200_000, context_tokens=400_000)
    assert "limit is" in res.trajectory.turns[0].observation and res.trajectory.turns[0].format_error


async def test_context_exhausted(chat):
    res, env, _ = await episode(chat, [LS], context_tokens=600)
    t = res.trajectory
    assert t.exit_status == ExitStatus.CONTEXT_EXHAUSTED and env.closed == 1
    assert res.trajectory.prompt_tokens + len(res.response_ids) <= 600


async def test_a_model_that_never_stops(chat):
    # No end-of-turn token, ever: the first turn is cut at max_new_tokens. The model never finished it, so it is
    # no format error: the episode ends there (generation_cut), unsubmitted, R = 0 + the turn penalty (Eq. 3-4).
    res, env, llm = await episode(chat, ["blah " * 500], stop=False, max_new_tokens=64, max_format_errors=3)
    t = res.trajectory
    assert t.exit_status == ExitStatus.GENERATION_CUT and [turn.stop_reason for turn in t.turns] == ["length"]
    assert not t.turns[0].format_error and t.turns[0].token_ids == llm.generated and len(llm.generated) == 64
    assert res.response_mask == [1] * 64 and env.finished_with is False and env.steps == 0  # nothing closed or run
    assert t.reward == turn_penalty(1, 40, 10) == 0.0 and not t.resolved  # R = 0 unsubmitted, no penalty (1 turn)
    m = episode_metrics(t)
    assert m["swe/exit/generation_cut"] == 1.0 and m["swe/exit/format_errors"] == 0.0
    assert m["swe/format_error_turns"] == 0.0


async def test_an_aborted_generation_is_its_own_ending_not_a_format_error(chat):
    llm = ScriptedLLM(chat.tok, chat.end_of_turn_id, [LS, SUBMIT], abort_after=3)
    res = await run_episode(ScriptedEnv(), get_tool_set("paper"), llm, chat, "sys", EpisodeLimits(),
                            Sampling(max_tokens=4096), "t-1")
    t = res.trajectory
    assert t.exit_status == ExitStatus.GENERATION_CUT and t.turns[0].stop_reason == "aborted"
    assert not t.turns[0].format_error and len(t.turns) == 1 and len(t.messages) == 2  # never entered the chat
    assert t.turns[0].token_ids == chat.tok.encode(LS, add_special_tokens=False)[:3] and t.reward == 0.0


async def test_sandbox_death_ends_the_episode(chat):
    class Dying(ScriptedEnv):
        async def step(self, action):
            raise SandboxDied("sandbox x is dead")

    res, env, _ = await episode(chat, [LS, SUBMIT], env=Dying())
    t = res.trajectory
    assert t.exit_status == ExitStatus.SANDBOX_ERROR and "is dead" in t.error
    assert env.closed >= 1 and env.finished_with is None and t.reward == 0.0


async def test_grader_failure_costs_the_reward_only(chat):
    class BadGrader(ScriptedEnv):
        async def finish(self, submitted):
            raise RuntimeError("grader exploded")

    res, env, _ = await episode(chat, [SUBMIT], env=BadGrader())
    t = res.trajectory
    assert t.exit_status == ExitStatus.SUBMITTED and not t.resolved and t.reward == 0.0
    assert "grader exploded" in t.error and env.closed == 1


async def test_episode_timeout(chat):
    class Slow(ScriptedEnv):
        async def step(self, action):
            await asyncio.sleep(30)

    res, env, _ = await episode(chat, [LS], env=Slow(), timeout_s=0.3)
    assert res.trajectory.exit_status == ExitStatus.TIMEOUT and env.closed == 1


async def test_cancellation_closes_the_environment_and_propagates(chat, caplog):
    class Slow(ScriptedEnv):
        async def step(self, action):
            await asyncio.sleep(30)

    env = Slow()
    task = asyncio.create_task(episode(chat, [LS], env=env))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert env.closed == 1 and env.finished_with is None
    assert "episode" in caplog.text and "cancelled after 1 turns; environment closed" in caplog.text


async def test_a_failed_model_server_abandons_the_episode_unscored(chat, caplog):
    # Not the agent's doing: no exit status or reward is made up for it; the caller sees the error (a CLI run
    # stops and resumes later, a training step fails as it would with verl's own loops).
    class Flaky(ScriptedLLM):
        async def generate(self, prompt_ids, sampling, request_id):
            if request_id.endswith("-1"):
                raise ConnectionResetError("server went away")
            return await super().generate(prompt_ids, sampling, request_id)

    env = ScriptedEnv()
    llm = Flaky(chat.tok, chat.end_of_turn_id, [LS], repeat_last=True)
    with pytest.raises(ModelError, match="ConnectionResetError: server went away"):
        await run_episode(env, get_tool_set("paper"), llm, chat, "sys", EpisodeLimits(), Sampling(max_tokens=64),
                          "t-1")
    assert env.closed == 1 and env.finished_with is None  # closed, and not graded
    assert "abandoned (ConnectionResetError: server went away) after 1 turns" in caplog.text


async def test_one_failing_episode_does_not_disturb_the_others(chat):
    class Dying(ScriptedEnv):
        async def step(self, action):
            raise SandboxDied("gone")

    results = await asyncio.gather(episode(chat, [LS, SUBMIT]), episode(chat, [LS, SUBMIT], env=Dying()),
                                   episode(chat, [LS, LS, SUBMIT]))
    assert [r[0].trajectory.exit_status for r in results] == [ExitStatus.SUBMITTED, ExitStatus.SANDBOX_ERROR,
                                                              ExitStatus.SUBMITTED]


async def test_long_observations_keep_head_and_tail_and_say_the_cut(chat):
    env = ScriptedEnv(lambda i, a: "HEAD" + "x" * 50_000 + "TAIL")
    res, _, _ = await episode(chat, [LS, SUBMIT], env=env, observation_head_chars=100, observation_tail_chars=50)
    turn = res.trajectory.turns[0]
    assert turn.observation.startswith("HEAD") and turn.observation.endswith("TAIL")
    assert "\n[... 49858 characters cut from the middle of this output ...]\n" in turn.observation
    assert turn.observation_tokens < 150  # the model is sent the cut observation, not 50k characters


async def test_the_turn_the_sandbox_died_on_is_recorded(chat):
    # Its tokens are in the response, so it counts as a turn (num_turns, the penalty, the viewer).
    class DiesOnSecond(ScriptedEnv):
        async def step(self, action):
            if self.steps:
                raise SandboxDied("sandbox x is dead")
            return await super().step(action)

    res, env, _ = await episode(chat, [LS, LS, SUBMIT], env=DiesOnSecond())
    t = res.trajectory
    assert t.exit_status == ExitStatus.SANDBOX_ERROR and t.num_turns == 2 and env.closed >= 1
    assert t.turns[1].action.tool == "bash" and "SandboxDied: sandbox x is dead" in t.turns[1].observation
    assert t.generated_tokens == sum(turn.generated_tokens for turn in t.turns)
