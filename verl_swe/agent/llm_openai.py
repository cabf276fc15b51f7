"""An OpenAI-compatible completions server (e.g. `vllm serve`) as the agent's model, token ids in and out.

The prompt is sent as token ids, and the reply's token ids are read back (vLLM's `return_token_ids`,
or its `token_id:N` logprob tokens), so nothing is re-tokenized. Every sampling value is sent explicitly
(the filters off for the rollout setting, paper 5.2; the model's own defaults under `--decoding
model-defaults`, verl_swe/agent/decoding.py), so the server's generation_config defaults never change them.

Each request's timeout scales with its tokens (`request_timeout_s`): a 131k-token prompt on a server that
32 workers share waits for its prefill behind others', which a fixed 600 s does not cover, while a short
one that hangs should not hold a worker for half an hour. `timeout_s` (or VERL_SWE_REQUEST_TIMEOUT_S) fixes it.
"""

from __future__ import annotations

import os

import httpx

from verl_swe.agent.llm import Generation, ModelError, Sampling


class LLMServerError(ModelError):
    pass


def request_timeout_s(prompt_tokens: int, max_tokens: int, base_s: float = 300.0, per_1k_tokens_s: float = 10.0) -> float:
    """Seconds one completion may take: a floor for queueing, plus time per thousand tokens of prompt (prefill)
    and of generation: 4k tokens ~340 s, 65k ~960 s, 131k ~1,600 s."""
    return base_s + per_1k_tokens_s * (prompt_tokens + max_tokens) / 1000


class OpenAICompletionsClient:
    def __init__(self, endpoint: str, model: str, timeout_s: float | None = None, api_key: str | None = None):
        """`timeout_s`: one fixed timeout per request (default: VERL_SWE_REQUEST_TIMEOUT_S, else scaled with
        the request's tokens, `request_timeout_s`)."""
        self.url = endpoint.rstrip("/") + ("/completions" if endpoint.rstrip("/").endswith("/v1") else "/v1/completions")
        self.model = model
        fixed = timeout_s if timeout_s is not None else os.environ.get("VERL_SWE_REQUEST_TIMEOUT_S")
        self.timeout_s = float(fixed) if fixed else None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.AsyncClient(timeout=self.timeout_s or 600.0, headers=headers)

    def timeout_for(self, prompt_tokens: int, max_tokens: int) -> httpx.Timeout:
        seconds = self.timeout_s or request_timeout_s(prompt_tokens, max_tokens)
        return httpx.Timeout(seconds, connect=min(seconds, 30.0))

    async def generate(self, prompt_ids: list[int], sampling: Sampling, request_id: str) -> Generation:
        body = {
            "model": self.model, "prompt": prompt_ids, "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature, "top_p": sampling.top_p, "top_k": sampling.top_k,
            "min_p": sampling.min_p, "repetition_penalty": sampling.repetition_penalty,
            "logprobs": 0, "return_token_ids": True, "return_tokens_as_token_ids": True,
            "skip_special_tokens": False, "include_stop_str_in_output": True,
            **({"stop_token_ids": list(sampling.stop_token_ids)} if sampling.stop_token_ids else {}),
            **sampling.extra,
        }
        try:
            r = await self.http.post(self.url, json=body, headers={"X-Request-Id": request_id},
                                     timeout=self.timeout_for(len(prompt_ids), sampling.max_tokens))
        except httpx.HTTPError as e:
            raise LLMServerError(f"{self.url}: {type(e).__name__}: {e}") from e
        if r.status_code != 200:
            raise LLMServerError(f"{self.url} answered {r.status_code}: {r.text[:500]}")
        choice = r.json()["choices"][0]
        lp = choice.get("logprobs") or {}
        ids = choice.get("token_ids")
        if ids is None:
            tokens = lp.get("tokens") or []
            if not all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
                raise LLMServerError("the server returned no token ids (vLLM: needs return_token_ids or "
                                     "return_tokens_as_token_ids)")
            ids = [int(t.split(":", 1)[1]) for t in tokens]
        logprobs = lp.get("token_logprobs")
        reason = {"stop": "stop", "length": "length"}.get(choice.get("finish_reason"), "aborted")
        return Generation(list(ids), [float(x) for x in logprobs] if logprobs else None, reason)

    async def aclose(self) -> None:
        await self.http.aclose()
