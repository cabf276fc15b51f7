"""A scripted model: it answers with exactly the tokens of the texts it was given, in order.

Used where a real served model cannot run (tests, benchmarks). It tokenizes each scripted reply with
the real tokenizer (a reply given as a list of ids is returned as those ids: a tokenization the tokenizer
would not produce, as a sampling model can), appends the end-of-turn token (unless told the model "never
stops"), and returns those ids with fixed log-probs; it records every prompt it was sent.
"""

from __future__ import annotations

from typing import Callable, Sequence

from verl_swe.agent.llm import Generation, Sampling

Reply = str | list[int] | Callable[[list[int]], str]


def reply_ids(tok, reply: Reply, prompt_ids: list[int]) -> list[int]:
    text = reply(prompt_ids) if callable(reply) else reply
    return list(text) if isinstance(text, list) else tok.encode(text, add_special_tokens=False)


class ScriptedLLM:
    def __init__(self, tokenizer, end_of_turn_id: int, replies: Sequence[Reply], *, stop: bool = True,
                 logprob: float = -0.5, repeat_last: bool = False, abort_after: int | None = None):
        """`abort_after`: the server aborts each reply after this many tokens (vLLM finish reason "abort")."""
        self.tok = tokenizer
        self.abort_after = abort_after
        self.eot = end_of_turn_id
        self.replies = list(replies)
        self.stop = stop
        self.logprob = logprob
        self.repeat_last = repeat_last
        self.prompts: list[list[int]] = []  # copies of what it was sent (tests compare them)
        self.generated: list[int] = []  # every token it returned, in order
        self.record_prompts = True

    async def generate(self, prompt_ids: list[int], sampling: Sampling, request_id: str) -> Generation:
        n = len(self.prompts)
        if self.record_prompts:
            self.prompts.append(list(prompt_ids))
        else:
            self.prompts.append([])
        if n >= len(self.replies) and not self.repeat_last:
            raise RuntimeError(f"the script has {len(self.replies)} replies; turn {n + 1} was asked for")
        reply = self.replies[min(n, len(self.replies) - 1)]
        ids = reply_ids(self.tok, reply, prompt_ids) + ([self.eot] if self.stop else [])
        stop_reason = "stop"
        if len(ids) > sampling.max_tokens:
            ids, stop_reason = ids[: sampling.max_tokens], "length"
        if self.abort_after is not None and len(ids) > self.abort_after:
            ids, stop_reason = ids[: self.abort_after], "aborted"
        self.generated.extend(ids)
        return Generation(ids, [self.logprob] * len(ids), stop_reason)


class ScriptedServerManager:
    """verl's `LLMServerClient` interface over a `ScriptedLLM` (what verl's agent loop worker passes in)."""

    def __init__(self, llm: ScriptedLLM, global_steps: int = 1):
        self.llm = llm
        self.sampling_params: list[dict] = []
        self.global_steps = global_steps  # the weight version verl's servers report with each output

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.sampling_params.append(dict(sampling_params))
        sampling = Sampling(max_tokens=int(sampling_params["max_tokens"]))
        gen = await self.llm.generate(prompt_ids, sampling, request_id)
        # as verl's LLMServerClient.generate: the server's weight version, copied to min/max_global_steps
        steps = self.global_steps
        return TokenOutput(token_ids=gen.token_ids, log_probs=gen.logprobs,
                           stop_reason="aborted" if gen.stop_reason == "aborted" else "completed",
                           extra_fields={"global_steps": steps, "min_global_steps": steps, "max_global_steps": steps})


class TurnScriptedLLM(ScriptedLLM):
    """A ScriptedLLM that answers turn t of an episode with reply t, read from the request id
    (`<episode_id>-<turn>`, as run_episode names requests), not from how many calls came before: an episode
    run again from scratch (after an infrastructure failure) gets the same replies again, as a model would
    be asked the same prompts again."""

    async def generate(self, prompt_ids: list[int], sampling: Sampling, request_id: str) -> Generation:
        turn = int(request_id.rsplit("-", 1)[1])
        reply = self.replies[min(turn, len(self.replies) - 1)]
        ids = reply_ids(self.tok, reply, prompt_ids) + ([self.eot] if self.stop else [])
        stop_reason = "stop"
        if len(ids) > sampling.max_tokens:
            ids, stop_reason = ids[: sampling.max_tokens], "length"
        self.generated.extend(ids)
        return Generation(ids, [self.logprob] * len(ids), stop_reason)
