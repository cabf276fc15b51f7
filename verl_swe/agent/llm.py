"""The one interface the agent needs from a model: token ids in, token ids (and log-probs) out.

    generate(prompt_ids, sampling, request_id) -> Generation(token_ids, logprobs, stop_reason)

Implementations: verl's rollout server manager (training), an OpenAI-compatible completions server
such as `vllm serve` (evaluation, RFT collection), a local transformers model (CPU tests and demos).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

StopReason = Literal["stop", "length", "aborted"]


@dataclass(frozen=True)
class Sampling:
    """Sampling for one turn. The paper samples at temperature 1 with every filter off (App. C)."""

    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    stop_token_ids: tuple[int, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)  # passed through (e.g. seed)

    def as_dict(self) -> dict[str, Any]:
        return {"max_tokens": self.max_tokens, "temperature": self.temperature, "top_p": self.top_p,
                "top_k": self.top_k, "min_p": self.min_p, "repetition_penalty": self.repetition_penalty,
                **({"stop_token_ids": list(self.stop_token_ids)} if self.stop_token_ids else {}), **self.extra}


@dataclass(frozen=True)
class Generation:
    token_ids: list[int]
    logprobs: list[float] | None
    stop_reason: StopReason


class ModelError(RuntimeError):
    """The model's server failed (not the agent): the episode is abandoned, neither scored nor saved, so a
    resumed run redoes it and training never sees a reward the policy did not earn."""


class LLMClient(Protocol):
    async def generate(self, prompt_ids: list[int], sampling: Sampling, request_id: str) -> Generation: ...


class VerlServerClient:
    """verl's `LLMServerClient` (the server manager the agent loop worker passes in)."""

    last_weight_version = 0  # the newest this process has seen: for an episode that never reached the model

    def __init__(self, server_manager: Any, base_params: dict[str, Any] | None = None):
        self.server = server_manager
        self.base = dict(base_params or {})  # verl's per-batch sampling params (temperature, logprobs, ...)
        # The weight versions (verl's global steps) the episode's turns were sampled with: verl's trainer
        # reads them from the output's extra_fields (min_global_steps / max_global_steps) for staleness metrics.
        self.weight_versions: list[int] = []

    async def generate(self, prompt_ids: list[int], sampling: Sampling, request_id: str) -> Generation:
        params = {**self.base, **sampling.as_dict()}
        out = await self.server.generate(request_id=request_id, prompt_ids=prompt_ids, sampling_params=params)
        extra = getattr(out, "extra_fields", None) or {}
        self.weight_versions += [v for v in (extra.get("min_global_steps"), extra.get("max_global_steps")) if v is not None]
        if self.weight_versions:
            VerlServerClient.last_weight_version = self.weight_versions[-1]
        reason: StopReason = "aborted" if out.stop_reason == "aborted" else (
            "length" if len(out.token_ids) >= sampling.max_tokens else "stop")
        return Generation(list(out.token_ids), list(out.log_probs) if out.log_probs is not None else None, reason)
