"""Every turn stops on all of the model's end tokens: Qwen2.5-Instruct ends with <|im_end|> (151645) or
<|endoftext|> (151643), and verl's vLLM (generation_config="vllm") adds neither list by itself."""

import json

from omegaconf import OmegaConf

import hydra

from tests.agent.test_verl_loop import YAML  # also registers the guess_word env and one_word tools
from verl_swe.agent.stop_tokens import generation_config_eos, stop_token_ids
from verl_swe.testing.scripted import ScriptedLLM
from verl_swe.testing.tokenizer import qwen_tokenizer
from verl_swe.trainer.model_cards import card_dir


def qwen_model_folder(tmp_path):
    """The real tokenizer next to Qwen2.5-7B-Instruct's public generation_config.json, as in a model folder."""
    from transformers import AutoTokenizer

    qwen_tokenizer().save_pretrained(tmp_path)
    (tmp_path / "generation_config.json").write_text((card_dir("Qwen/Qwen2.5-7B-Instruct") /
                                                      "generation_config.json").read_text())
    return AutoTokenizer.from_pretrained(str(tmp_path), local_files_only=True)


def test_both_qwen_end_tokens_from_the_models_generation_config(tmp_path):
    tok = qwen_model_folder(tmp_path)
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert stop_token_ids(tok, im_end) == (151645, 151643)
    # without a generation_config.json: the end of turn and the tokenizer's EOS (both <|im_end|> for Qwen)
    assert stop_token_ids(qwen_tokenizer(), im_end) == (151645,)
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": 7}))
    assert generation_config_eos(tmp_path) == [7]


async def test_the_agent_loop_sends_them_to_verls_server_with_every_turn(tmp_path):
    tok = qwen_model_folder(tmp_path)
    llm = ScriptedLLM(tok, tok.convert_tokens_to_ids("<|im_end|>"), ["apple", "banana"])
    [entry] = OmegaConf.load(YAML)
    entry = OmegaConf.merge(entry, {"env": "guess_word", "tool_set": "one_word",
                                    "limits": {"max_turns": 5, "penalty_threshold": 3}})
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    from verl_swe.testing.scripted import ScriptedServerManager

    trainer = OmegaConf.create({"actor_rollout_ref": {"rollout": {"response_length": 4096, "prompt_length": 4096}}})
    server = ScriptedServerManager(llm)
    loop = hydra.utils.instantiate(entry, trainer_config=DictConfigWrap(config=trainer), server_manager=server,
                                   tokenizer=tok, processor=None, hf_model_type=None, dataset_cls=None,
                                   data_config=DictConfigWrap(config=OmegaConf.create({})), tools=None)
    await loop.run({"temperature": 1.0}, extra_info={"task": {"instance_id": "w-1", "secret": "banana"}})
    sent = server.sampling_params
    assert len(sent) == 2 and all(p["stop_token_ids"] == [151645, 151643] for p in sent)
