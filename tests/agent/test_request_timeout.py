"""The eval client's request timeout scales with the request's tokens (a 131k prompt waits for its prefill),
or is fixed by the caller / VERL_SWE_REQUEST_TIMEOUT_S."""

import pytest

from verl_swe.agent.llm_openai import OpenAICompletionsClient, request_timeout_s


async def test_timeout_grows_with_the_context_and_can_be_fixed(monkeypatch):
    monkeypatch.delenv("VERL_SWE_REQUEST_TIMEOUT_S", raising=False)
    assert request_timeout_s(0, 0) == 300.0
    assert request_timeout_s(131072 - 4096, 4096) == pytest.approx(300 + 10 * 131.072)  # ~1,611 s at 131k
    client = OpenAICompletionsClient("http://localhost:1", "m")
    short, long = client.timeout_for(2000, 1000), client.timeout_for(127000, 4096)
    assert short.read == pytest.approx(330.0) and long.read > 1500 and long.connect == 30.0
    await client.aclose()
    fixed = OpenAICompletionsClient("http://localhost:1", "m", timeout_s=42)
    assert fixed.timeout_for(127000, 4096).read == 42
    monkeypatch.setenv("VERL_SWE_REQUEST_TIMEOUT_S", "900")
    by_env = OpenAICompletionsClient("http://localhost:1", "m")
    assert by_env.timeout_for(10, 10).read == 900
    await fixed.aclose()
    await by_env.aclose()
