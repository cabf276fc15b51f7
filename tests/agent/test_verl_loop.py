"""SWEAgentLoop inside verl's machinery: built from the packaged YAML by hydra exactly as verl's
AgentLoopWorker builds it, fed a dataset row, returning an AgentLoopOutput verl can batch."""

import hydra
import pytest
from omegaconf import OmegaConf

from verl_swe.agent.trajectories import load_trajectories
from verl_swe.testing.scripted import ScriptedLLM, ScriptedServerManager
from verl_swe.testing.tokenizer import qwen_tokenizer
from tests.agent.test_swe_agent import ORACLE, PAGER

YAML = "verl_swe/trainer/config/agent_loop.yaml"


def build_loop(entry, llm, response_length=8192):
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    trainer = OmegaConf.create({"actor_rollout_ref": {"rollout": {"response_length": response_length,
                                                                  "prompt_length": 4096}}})
    return hydra.utils.instantiate(entry, trainer_config=DictConfigWrap(config=trainer),
                                   server_manager=ScriptedServerManager(llm), tokenizer=qwen_tokenizer(),
                                   processor=None, hf_model_type=None, dataset_cls=None,
                                   data_config=DictConfigWrap(config=OmegaConf.create({})), tools=None)


def entry_for(backend, task_envs, **override):
    [entry] = OmegaConf.load(YAML)
    sandbox = task_envs.template.model_dump(mode="json", exclude={"backend"})
    return OmegaConf.merge(entry, {"backend": backend, "cache_dir": str(task_envs.store.cache_dir),
                                   "sandbox": sandbox}, override)


def test_the_plugin_registers_swe_agent():
    import verl  # noqa: F401 - loads the verl.plugins entry points
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    assert _agent_loop_registry["swe_agent"]["_target_"] == "verl_swe.agent.verl_loop.SWEAgentLoop"


async def test_a_dataset_row_becomes_a_scored_agent_loop_output(session_backend, task_envs, mini_tasks, tmp_path):
    tok = qwen_tokenizer()
    llm = ScriptedLLM(tok, tok.convert_tokens_to_ids("<|im_end|>"), ORACLE)
    loop = build_loop(entry_for(session_backend, task_envs, trajectory_dir=str(tmp_path)), llm)
    params = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}
    out = await loop.run(params, raw_prompt=[], agent_name="swe_agent", index=0,
                         extra_info={"task": mini_tasks[PAGER].model_dump_json()})
    assert out.reward_score == 1.0 and out.num_turns == 2 * len(ORACLE) + 1
    info = out.extra_fields["reward_extra_info"]
    assert info["resolved"] == 1.0 and info["exit_status"] == "submitted" and info["num_turns"] == len(ORACLE)
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs)
    # the weight version every turn was sampled with: verl's trainer reads both keys of every sample
    assert out.extra_fields["min_global_steps"] == out.extra_fields["max_global_steps"] == 1
    [saved] = load_trajectories(tmp_path)  # and the trajectory says which policy sampled it (the viewer's steps)
    assert saved.metadata["policy_version"] == 1
    assert [t for t, m in zip(out.response_ids, out.response_mask) if m] == llm.generated
    sent = loop.server_manager.sampling_params[0]
    assert sent["logprobs"] is True and sent["temperature"] == 1.0 and sent["max_tokens"] == 4096
    tensors = out.as_dict()  # what verl batches
    assert tensors["responses"].shape == tensors["response_mask"].shape == tensors["rollout_log_probs"].shape


async def test_response_length_bounds_the_episode(session_backend, task_envs, mini_tasks):
    tok = qwen_tokenizer()
    llm = ScriptedLLM(tok, tok.convert_tokens_to_ids("<|im_end|>"), ["```command\nls -la\n```"], repeat_last=True)
    loop = build_loop(entry_for(session_backend, task_envs), llm, response_length=600)
    out = await loop.run({"temperature": 1.0}, extra_info={"task": mini_tasks[PAGER].model_dump()})
    assert out.extra_fields["reward_extra_info"]["exit_status"] == "context_exhausted"
    assert len(out.response_ids) <= 600 and out.reward_score == 0.0


def test_a_typo_in_the_yaml_is_named():
    [entry] = OmegaConf.load(YAML)
    bad = OmegaConf.merge(entry, {"limits": {"max_turn": 40}})
    # hydra wraps the error; the message names the key and says it is not allowed
    with pytest.raises(hydra.errors.InstantiationException, match=r"limits.max_turn\n\s+Extra inputs are not permitted"):
        build_loop(bad, None)


async def test_a_row_without_a_task_says_where_it_belongs(session_backend, task_envs):
    loop = build_loop(entry_for(session_backend, task_envs), None)
    with pytest.raises(ValueError, match="extra_info.task"):
        await loop.run({}, extra_info={})


# A non-SWE environment and tool set, dropped in with one registration each and a YAML line.
from verl_swe.agent.env import AgentEnv, Outcome, Step, register_env  # noqa: E402
from verl_swe.tools import ToolSet, register_tool_set  # noqa: E402
from verl_swe.types import Action  # noqa: E402


@register_env("guess_word")
class GuessWord(AgentEnv):
    def __init__(self, row, secret_hint: str = ""):
        self.secret, self.hint, self.said = row["secret"], secret_hint, []

    async def start(self):
        return f"Guess the word. Hint: {self.hint}"

    async def step(self, action):
        self.said.append(action.args["word"])
        return Step("yes" if self.said[-1] == self.secret else "no", done=self.said[-1] == self.secret)

    async def finish(self, submitted):
        return Outcome(resolved=submitted)

    async def close(self):
        pass


@register_tool_set("one_word")
class OneWord(ToolSet):
    name = "one_word"

    def instructions(self):
        return "Answer with one word."

    def parse(self, text):
        return Action("say", {"word": text.strip()}, text.strip())


async def test_a_registered_non_swe_environment_runs_from_yaml():
    tok = qwen_tokenizer()
    llm = ScriptedLLM(tok, tok.convert_tokens_to_ids("<|im_end|>"), ["apple", "banana"])
    [entry] = OmegaConf.load(YAML)
    entry = OmegaConf.merge(entry, {"env": "guess_word", "tool_set": "one_word", "env_options": {"secret_hint": "yellow"},
                                    "limits": {"max_turns": 5, "penalty_threshold": 3}})
    loop = build_loop(entry, llm)
    out = await loop.run({}, extra_info={"task": {"instance_id": "w-1", "secret": "banana"}})
    assert out.reward_score == 1.0 and out.extra_fields["reward_extra_info"]["num_turns"] == 2
    assert "Hint: yellow" in tok.decode(out.prompt_ids)


async def test_overlong_options_mask_or_penalize(session_backend, task_envs, mini_tasks):
    tok = qwen_tokenizer()
    eot = tok.convert_tokens_to_ids("<|im_end|>")
    row = {"task": mini_tasks[PAGER].model_dump()}
    looping = ["```command\nls -la\n```"]
    masked = build_loop(entry_for(session_backend, task_envs, overlong={"mask_truncated": True}),
                        ScriptedLLM(tok, eot, looping, repeat_last=True), response_length=700)
    out = await masked.run({}, extra_info=row)
    assert out.extra_fields["reward_extra_info"]["exit_status"] == "context_exhausted" and sum(out.response_mask) == 0
    # soft penalty: a 700-token response with a 400-token buffer: (300 - len) / 400, clipped to [-1, 0]
    soft = build_loop(entry_for(session_backend, task_envs, overlong={"soft_penalty_cache_tokens": 400}),
                      ScriptedLLM(tok, eot, looping, repeat_last=True), response_length=700)
    out = await soft.run({}, extra_info=row)
    n = len(out.response_ids)
    assert sum(out.response_mask) > 0 and out.reward_score == pytest.approx(max(-1.0, min(0.0, (300 - n) / 400)))


async def test_an_infrastructure_failure_is_returned_marked_and_carries_no_gradient(tmp_path, mini_tasks):
    # env_prepare: ahead and no environment built on this machine: the episode cannot start, and that is not
    # the model's doing. verl needs the output back: it carries a zero mask and reward, and its kind for the
    # sampler (which removes it from its group) and for swe/infra/* metrics.
    tok = qwen_tokenizer()
    llm = ScriptedLLM(tok, tok.convert_tokens_to_ids("<|im_end|>"), ORACLE)
    [entry] = OmegaConf.load(YAML)
    entry = OmegaConf.merge(entry, {"backend": "local", "cache_dir": str(tmp_path / "empty-cache"),
                                    "placement": {"env_prepare": "ahead"}})
    loop = build_loop(entry, llm)
    out = await loop.run({}, raw_prompt=[], agent_name="swe_agent", index=0,
                         extra_info={"task": mini_tasks[PAGER].model_dump_json()})
    assert out.extra_fields["infra_failure"] == "env_not_ready" and out.reward_score == 0.0
    assert sum(out.response_mask) == 0 and llm.generated == []
    assert out.extra_fields["swe_metrics"]["swe/infra/env_not_ready"] == 1.0
    assert out.extra_fields["reward_extra_info"]["infra_failure"] == "env_not_ready"
