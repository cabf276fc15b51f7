"""The loop driven by a real (tiny, random) transformers model on CPU: real sampling, real log-probs."""

import math

from verl_swe.agent.episode import EpisodeLimits, run_episode
from verl_swe.agent.llm import Sampling
from verl_swe.agent.llm_local import TransformersClient
from verl_swe.agent.tokens import ChatTokens
from verl_swe.testing.envs import ScriptedEnv
from verl_swe.testing.tiny import tiny_qwen2
from verl_swe.testing.tokenizer import qwen_tokenizer
from verl_swe.tools import get_tool_set


async def test_a_tiny_model_runs_an_episode_with_aligned_logprobs():
    tok = qwen_tokenizer()
    chat = ChatTokens(tok)
    llm = TransformersClient(tiny_qwen2(len(tok)), chat.end_of_turn_id)
    res = await run_episode(ScriptedEnv(), get_tool_set("paper"), llm, chat, "sys",
                            EpisodeLimits(max_turns=3, max_format_errors=3, max_new_tokens=12, penalty_threshold=2),
                            Sampling(max_tokens=12), "t-1")
    t = res.trajectory
    # A random model rarely ends its turn: the first one is cut at max_new_tokens (generation_cut, not a format
    # error); one that does end its turns runs all 3.
    if t.exit_status.value == "generation_cut":
        assert t.num_turns >= 1 and t.turns[-1].stop_reason == "length" and not t.turns[-1].format_error
    else:
        assert t.num_turns == 3 and t.exit_status.value in ("format_errors", "max_turns")
    generated = [lp for lp, m in zip(res.response_logprobs, res.response_mask) if m]
    assert len(generated) == t.generated_tokens == sum(turn.generated_tokens for turn in t.turns)
    assert all(lp <= 0.0 and math.isfinite(lp) for lp in generated)
