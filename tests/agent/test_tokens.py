"""Token-in/token-out with the real Qwen tokenizer: what the model was sent is exactly the template's
rendering of the conversation so far, and the trained-on tokens are exactly the generated ones."""

import random

import pytest

from verl_swe.agent.episode import EpisodeLimits, run_episode
from verl_swe.agent.llm import Sampling
from verl_swe.agent.tokens import ChatTokens
from verl_swe.testing.envs import ScriptedEnv
from verl_swe.testing.scripted import ScriptedLLM
from verl_swe.testing.tokenizer import qwen_tokenizer
from verl_swe.tools import get_tool_set
from verl_swe.types import ExitStatus

rng = random.Random(0)
SNIPPETS = ["def f(x):\n    return x + 1\n", "Ünïcödé ✓ 中文 😀", "  indented\n\ttabs\n", "", "a" * 300,
            "Traceback (most recent call last):\n  File \"x.py\", line 3\nValueError: bad\n", "```\nfenced\n```"]


def reply(tool_set: str, i: int, last: bool) -> str:
    cmd = "submit" if last else rng.choice(["ls -la", "grep -rn 'def ' .", "python -c 'print(1)'", "open a.py 3"])
    if tool_set == "paper":
        return f"Step {i}: {rng.choice(SNIPPETS)}\n```command\n{cmd}\n```"
    args = '{"command": "' + cmd.replace("'", "") + '"}' if not last else "{}"
    name = "submit" if last else "bash"
    return f"Thinking {i}.\n<tool_call>\n{{\"name\": \"{name}\", \"arguments\": {args}}}\n</tool_call>"


@pytest.mark.parametrize("tool_set", ["paper", "native"])
async def test_80_turns_token_exact(tool_set):
    tok = qwen_tokenizer()
    tools = get_tool_set(tool_set)
    chat = ChatTokens(tok, tools.schemas(), tools.observation_role)
    turns = 80
    llm = ScriptedLLM(tok, chat.end_of_turn_id, [reply(tool_set, i, i == turns - 1) for i in range(turns)])
    env = ScriptedEnv(lambda i, a: f"output {i}:\n{rng.choice(SNIPPETS)}")
    limits = EpisodeLimits(max_turns=turns, context_tokens=200_000)
    res = await run_episode(env, tools, llm, chat, "You fix bugs.", limits, Sampling(max_tokens=1024), "t-1")
    traj = res.trajectory
    assert traj.exit_status == ExitStatus.SUBMITTED and traj.num_turns == turns
    # Before every generation, the context equals the template's rendering of the conversation so far.
    assistant_at = [i for i, m in enumerate(traj.messages) if m["role"] == "assistant"]
    for k, sent in enumerate(llm.prompts):
        so_far = traj.messages[: assistant_at[k]]
        expected = tok.apply_chat_template(so_far, tools=tools.schemas(), tokenize=False, add_generation_prompt=True)
        assert tok.decode(sent) == expected, f"turn {k}"
        assert sent == tok.encode(expected, add_special_tokens=False), f"turn {k}: same text, different tokens"
    # The whole episode decodes to the conversation (plus the observation-free end of the last turn).
    full = tok.apply_chat_template(traj.messages + [{"role": tools.observation_role, "content": "X"}],
                                   tools=tools.schemas(), tokenize=False, add_generation_prompt=True)
    decoded = tok.decode(res.prompt_ids + res.response_ids)
    assert full.startswith(decoded) and decoded.endswith(tok.decode([chat.end_of_turn_id]))
    # Masked-in tokens are exactly the generated tokens, in order, and log-probs line up with them.
    trained = [t for t, m in zip(res.response_ids, res.response_mask) if m]
    assert trained == llm.generated
    assert len(res.response_ids) == len(res.response_mask) == len(res.response_logprobs)
    assert all(lp == -0.5 for lp, m in zip(res.response_logprobs, res.response_mask) if m)
    assert all(lp == 0.0 for lp, m in zip(res.response_logprobs, res.response_mask) if not m)
