"""Episodes for the RFT tests: the real agent loop (run_episode) with the real Qwen tokenizer, a scripted
model and a scripted environment, saved as the agent runner saves them."""

from __future__ import annotations

from pathlib import Path

from verl_swe.agent.episode import EpisodeLimits, EpisodeResult, run_episode
from verl_swe.agent.llm import Sampling
from verl_swe.agent.prompts import system_prompt
from verl_swe.agent.tokens import ChatTokens
from verl_swe.agent.trajectories import save_trajectory
from verl_swe.testing.envs import ScriptedEnv
from verl_swe.testing.scripted import ScriptedLLM
from verl_swe.testing.tokenizer import qwen_tokenizer
from verl_swe.tools import get_tool_set

TRICKY = ["def f(x):\n    return x + 1\n", "Ünïcödé ✓ 中文 😀", "  indented\n\ttabs  \n", "a" * 200, "```\nfenced\n```"]


def cmd(tool_set: str, command: str, i: int = 0) -> str:
    if tool_set == "paper":
        return f"Step {i}: {TRICKY[i % len(TRICKY)]}\n```command\n{command}\n```"
    name, args = ("submit", "{}") if command == "submit" else ("bash", '{"command": "' + command + '"}')
    return f"Thinking {i}: {TRICKY[i % len(TRICKY)]}\n<tool_call>\n{{\"name\": \"{name}\", \"arguments\": {args}}}\n</tool_call>"


def malformed(i: int = 0) -> str:
    return f"I will look around {i} but forget the command block. ls -la"


def script(tool_set: str, format_errors_at=(1, 3), turns: int = 6) -> list[str]:
    """`turns` replies, malformed at `format_errors_at`, the last one submitting."""
    return [malformed(i) if i in format_errors_at else cmd(tool_set, "submit" if i == turns - 1 else "ls -la", i)
            for i in range(turns)]


def default_system(tool_set: str) -> str:
    return system_prompt(get_tool_set(tool_set).instructions())


async def play(replies: list[str], *, tool_set: str = "paper", instance_id: str = "repo__task-1",
               episode_id: str = "repo__task-1.0", resolved: bool = True, system: str | None = None,
               run_dir: Path | None = None, max_turns: int = 40) -> EpisodeResult:
    tok = qwen_tokenizer()
    tools = get_tool_set(tool_set)
    chat = ChatTokens(tok, tools.schemas(), tools.observation_role)
    llm = ScriptedLLM(tok, chat.end_of_turn_id, replies)
    env = ScriptedEnv(lambda i, a: f"output {i}:\n{TRICKY[i % len(TRICKY)]}", resolved=resolved)
    limits = EpisodeLimits(max_turns=max_turns, penalty_threshold=min(10, max_turns - 1), context_tokens=100_000)
    res = await run_episode(env, tools, llm, chat, system or default_system(tool_set), limits,
                            Sampling(max_tokens=1024), instance_id, episode_id)
    res.trajectory.metadata["tool_set"] = tool_set  # as AgentRunner.run records it
    if run_dir is not None:
        save_trajectory(run_dir, res.trajectory)
    return res
