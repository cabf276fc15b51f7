"""`--decoding`: the rollout setting (training), the model's own generation_config defaults (evaluation, as the
paper evaluates every model), KEY=VALUE on top; and the values reach the sampler: the request the eval client
sends carries them, and vLLM's own request parsing turns that request into SamplingParams with them, whatever
defaults the server would apply."""

import json

import pytest

from verl_swe.agent.decoding import DecodingError, resolve_decoding
from verl_swe.agent.llm_openai import OpenAICompletionsClient
from verl_swe.testing.openai_server import ScriptedCompletionsServer
from verl_swe.testing.tokenizer import qwen_tokenizer
from verl_swe.trainer.model_cards import materialize

QWEN_DEFAULTS = {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05}  # the model card's
OFF = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0}


def test_the_rollout_setting_is_temperature_1_with_every_filter_off():
    d = resolve_decoding(None, "rollout", "Qwen/Qwen2.5-72B-Instruct")
    assert d.values == OFF and d.from_file == {}


def test_model_defaults_from_a_hub_id_card_or_a_model_folder(tmp_path):
    card = resolve_decoding(None, "model-defaults", "Qwen/Qwen2.5-72B-Instruct")
    assert card.values == {**OFF, **QWEN_DEFAULTS} and card.from_file == QWEN_DEFAULTS
    assert card.source.endswith("model_cards/Qwen2.5-72B-Instruct/generation_config.json")
    assert "temperature=0.7, top_p=0.8, top_k=20" in card.describe()

    folder = materialize("Qwen/Qwen2.5-7B-Instruct", tmp_path / "model")  # a served model's folder
    cfg = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**cfg, "temperature": 0.6, "top_k": None}))
    local = resolve_decoding(None, "model-defaults", str(folder))
    assert local.source == str(folder / "generation_config.json")
    # a key the file leaves unset keeps its neutral value, as vLLM's generation_config="auto" does
    assert local.values == {**OFF, "temperature": 0.6, "top_p": 0.8, "repetition_penalty": 1.05}
    # served under another name: found through --tokenizer (the model folder), or named as a path
    assert resolve_decoding(None, "model-defaults", "my-model", str(folder)).values == local.values
    assert resolve_decoding([f"model-defaults={folder}"], "rollout", "my-model").values == local.values

    (folder / "generation_config.json").write_text(json.dumps({"do_sample": False, "temperature": 0.7}))
    assert resolve_decoding(None, "model-defaults", str(folder)).values["temperature"] == 0.0  # greedy


def test_overrides_on_top_and_bad_specs():
    d = resolve_decoding(["model-defaults", "top_k=-1,temperature=1", "seed=7"], "rollout", "Qwen/Qwen2.5-7B-Instruct")
    assert d.values == {**OFF, "top_p": 0.8, "repetition_penalty": 1.05, "seed": 7}
    assert d.overrides == {"top_k": -1, "temperature": 1.0, "seed": 7}
    s = d.sampling(512)
    assert (s.max_tokens, s.temperature, s.top_p, s.top_k, s.extra) == (512, 1.0, 0.8, -1, {"seed": 7})
    with pytest.raises(DecodingError, match="unknown decoding key 'topp'"):
        resolve_decoding(["topp=0.9"], "rollout")
    with pytest.raises(DecodingError, match="one base"):
        resolve_decoding(["rollout", "model-defaults"], "rollout")
    with pytest.raises(DecodingError, match="no generation_config.json for some-served-name"):
        resolve_decoding(None, "model-defaults", "some-served-name")


async def test_the_values_reach_the_sampler():
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest

    tok = qwen_tokenizer()
    eot = tok.convert_tokens_to_ids("<|im_end|>")
    server_defaults = {"temperature": 0.2, "top_p": 0.5, "top_k": 5, "repetition_penalty": 1.3}  # vLLM "auto"
    for spec, want in ((None, {**OFF, **QWEN_DEFAULTS}), (["rollout"], OFF),
                       (["top_p=0.95", "min_p=0.05"], {**OFF, **QWEN_DEFAULTS, "top_p": 0.95, "min_p": 0.05})):
        d = resolve_decoding(spec, "model-defaults", "Qwen/Qwen2.5-72B-Instruct")
        with ScriptedCompletionsServer(tok, eot, ["hi"]) as server:
            client = OpenAICompletionsClient(server.url, "m")
            await client.generate(tok.encode("hello"), d.sampling(64), "r-0")
            await client.aclose()
        [body] = server.requests
        assert {k: body[k] for k in want} == want
        params = CompletionRequest.model_validate(body).to_sampling_params(64, default_sampling_params=server_defaults)
        for key, value in want.items():
            got = getattr(params, key)
            assert got == pytest.approx(value) or (key == "top_k" and value == -1 and got in (-1, 0)), key
