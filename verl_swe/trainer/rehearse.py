"""`verl-swe rehearse`: a GPU run's start-up logic, run on a CPU before the cluster is booked.

A GPU run can die minutes in, after the weights are loaded, on things that are pure configuration: verl's
vLLM server refusing rollout.max_model_len above the model's max_position_embeddings, vLLM building a RoPE
without Qwen2.5's rope_theta, or, silently, a rollout sampling with one RoPE while the trainer scores with
another. All of it is decided by code that needs no GPU, so rehearse runs that code on the recipe:

- verl's `validate_config` (as `verl.trainer.main_ppo.main` calls it) on the composed config;
- every config dataclass the workers build (`omega_conf_to_dataclass` after `OmegaConf.resolve`, as the
  task runner does): HFModelConfig with the recipe's override_config applied to the model's config.json,
  the actor's FSDP actor/engine/optimizer configs, TrainingWorkerConfig, RolloutConfig;
- the rollout: verl's vLLMHttpServer constructor and argument construction, then vLLM's own engine config
  (rehearse_vllm.py);
- the trainer's and the rollout's RoPE side by side (rope.py), the context each side allows, the stop
  tokens the agent sends against the model's end tokens (through vLLM's SamplingParams), and the prompt
  each task of the local parquet renders to, tool schemas included, against data.max_prompt_length.

The model's config.json: model.path when it is a local folder, else the bundled public config of model.path
or swe.base_model (model_cards/). Not rehearsed: weight loading, memory (`verl-swe plan`), NCCL, CUDA graphs.
A check that cannot run here (no local parquet, --no-engine, an earlier refusal) is reported as "not checked"
with its reason; on more than one node an unmeasured prompt length is a finding. An SFT config (the RFT
recipe, verl.trainer.sft_trainer) is rehearsed by rehearse_sft.py.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from verl_swe.trainer.model_cards import MODELS, card_dir, materialize

YARN_FIX = "one RoPE mapping for both sides, rope_theta included (verl_swe/trainer/config/qwen2_5_yarn.yaml)"


@dataclass(frozen=True)
class Finding:
    key: str
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.key}: {self.problem}\n    fix: {self.fix}"


@dataclass
class Rehearsal:
    model: str = ""
    checks: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    not_checked: list[str] = field(default_factory=list)  # "what: why", for every check that could not run

    @property
    def ok(self) -> bool:
        return not self.findings

    def fail(self, key: str, problem: str, fix: str) -> None:
        self.findings.append(Finding(key, problem, fix))

    def skip(self, what: str, why: str) -> None:
        self.not_checked.append(f"{what}: {why}")

    def report(self) -> str:
        lines = [f"model config: {self.model}", *(f"  ok  {c}" for c in self.checks)]
        lines += [f"  --  not checked: {n}" for n in self.not_checked]
        lines += [f"  FAIL {f}" for f in self.findings]
        return "\n".join(lines)


# The checks after the worker configs, named for "not checked" when an earlier step stops the rehearsal.
LATER_CHECKS = ["context (prompt + response against the rollout and the trainer's RoPE)", "vLLM engine config",
                "stop tokens", "agent prompt lengths (data.train_files / data.val_files)"]


def rehearse(config: DictConfig, engine: bool = True) -> Rehearsal:
    """Run the start-up logic of a GPU run of `config` (a composed recipe); `engine=False` skips vLLM."""
    import verl  # noqa: F401 - loads the plugin (verl_compat's override path) as every verl process does

    if "actor_rollout_ref" not in config and "engine" in config:  # an SFT (RFT) config: verl.trainer.sft_trainer
        from verl_swe.trainer.rehearse_sft import rehearse_sft

        return rehearse_sft(config)
    r = Rehearsal()
    with tempfile.TemporaryDirectory(prefix="verl-swe-rehearse-") as tmp:
        model_dir = _model_dir(config, Path(tmp), r)
        if model_dir is None:
            return _stopped(r, ["verl validate_config", "worker configs", *LATER_CHECKS], "no model config.json")
        cfg = copy.deepcopy(config)
        with open_dict(cfg):
            cfg.actor_rollout_ref.model.path = str(model_dir)
        if not _verl_validate(cfg, r):
            return _stopped(r, ["worker configs", *LATER_CHECKS], "verl's validate_config refused the config")
        OmegaConf.resolve(cfg)  # as verl's task runner does before any worker builds its configs
        built = _worker_configs(cfg, r)
        if built is None:
            return _stopped(r, LATER_CHECKS, "verl could not build the workers' configs")
        model, rollout = built
        _guarded(r, "(context)", lambda: _context(cfg, model, rollout, r))
        vllm = _guarded(r, "actor_rollout_ref.rollout", lambda: _rollout_engine(cfg, model, r)) if engine else None
        if not engine:
            r.skip("vLLM engine config and the RoPE it builds", "engine=False (--no-engine)")
        _guarded(r, "swe.agent", lambda: _stop_tokens(cfg, model, rollout, r, vllm_ok=vllm is not None))
        measured = _guarded(r, "data", lambda: _prompt_lengths(cfg, model, r)) or set()
        nnodes = int(OmegaConf.select(cfg, "trainer.nnodes", default=1) or 1)
        if nnodes > 1 and "train_files" not in measured:
            # On many nodes a silently left-truncated prompt costs a cluster's hours: the check must have run.
            r.fail("data.train_files", f"the agent's prompt lengths were not measured (no local parquet of "
                   f"data.train_files) and the run is on trainer.nnodes={nnodes} nodes", "rehearse where the "
                   "training parquet is (data.train_files=/shared/.../stage1.parquet), before booking the nodes")
    return r


def _stopped(r: Rehearsal, checks: list[str], why: str) -> Rehearsal:
    for check in checks:
        r.skip(check, why)
    return r


def _guarded(r: Rehearsal, key: str, check):
    """A check that could not run is a finding too (e.g. an invalid swe.agent), never a traceback."""
    try:
        return check()
    except Exception as e:  # noqa: BLE001
        r.fail(key, f"the check could not run: {type(e).__name__}: {e}", "the key in the message")
        return None


def _model_dir(config: DictConfig, tmp: Path, r: Rehearsal) -> Path | None:
    path = str(OmegaConf.select(config, "actor_rollout_ref.model.path", throw_on_missing=False))
    local = Path(path).expanduser()
    if (local / "config.json").is_file():
        r.model = f"{local} (local folder)"
        return local
    for name in (path, OmegaConf.select(config, "swe.base_model", default=None)):
        if name and card_dir(name):
            r.model = f"{name} (bundled public config.json; model.path={path})"
            return materialize(name, tmp / "model")
    r.fail("actor_rollout_ref.model.path", f"{path!r} is neither a local model folder with config.json nor a "
           "bundled model", f"point it at a Hugging Face model folder, or set swe.base_model to one of {list(MODELS)}")
    return None


def _verl_validate(cfg: DictConfig, r: Rehearsal) -> bool:
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    except Exception as e:  # noqa: BLE001 - verl's own refusals are assertions and ValueErrors
        r.fail("(verl validate_config)", f"{type(e).__name__}: {e}", "the key verl names above")
        return False
    r.checks.append("verl validate_config")
    return True


def _worker_configs(cfg: DictConfig, r: Rehearsal):
    """The dataclasses ActorRolloutRefWorker.init_model and the task runner build, in their order."""
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config import HFModelConfig, TrainingWorkerConfig

    arr = cfg.actor_rollout_ref
    steps = [("actor_rollout_ref.model", lambda: omega_conf_to_dataclass(arr.model, dataclass_type=HFModelConfig)),
             ("actor_rollout_ref.actor", lambda: omega_conf_to_dataclass(arr.actor)),
             ("actor_rollout_ref.rollout", lambda: omega_conf_to_dataclass(arr.rollout)),
             ("actor_rollout_ref.rollout.checkpoint_engine", lambda: omega_conf_to_dataclass(arr.rollout.checkpoint_engine))]
    built = {}
    for key, build in steps:
        try:
            built[key] = build()
        except Exception as e:  # noqa: BLE001
            r.fail(key, f"verl cannot build its config: {type(e).__name__}: {e}", "the field named in the message")
            return None
    model, actor, rollout = (built[k] for k in ("actor_rollout_ref.model", "actor_rollout_ref.actor",
                                                "actor_rollout_ref.rollout"))
    actor.model_config = model
    TrainingWorkerConfig(model_type=model.model_type, model_config=model, engine_config=actor.engine,
                         optimizer_config=actor.optim, checkpoint_config=actor.checkpoint)
    hf = model.hf_config
    r.checks.append(f"HFModelConfig, override_config applied: max_position_embeddings {hf.max_position_embeddings}, "
                    f"RoPE {_rope_text(hf)}")
    r.checks.append(f"{type(actor).__name__} / {type(actor.engine).__name__} / TrainingWorkerConfig / "
                    f"{type(rollout).__name__} / {type(built['actor_rollout_ref.rollout.checkpoint_engine']).__name__}")
    return model, rollout


def _rope_text(hf_config: Any) -> str:
    from verl_swe.trainer.rope import positions_reached, rope_parameters

    return f"{rope_parameters(hf_config)} (reaches {positions_reached(hf_config)} positions)"


def _context(cfg: DictConfig, model, rollout, r: Rehearsal) -> None:
    from verl_swe.trainer.rope import positions_reached

    context = rollout.prompt_length + rollout.response_length
    agent = OmegaConf.select(cfg, "swe.agent.limits.context_tokens", default=None)
    reach = positions_reached(model.hf_config)
    if rollout.max_model_len is not None and context > rollout.max_model_len:
        r.fail("actor_rollout_ref.rollout.max_model_len", f"{rollout.max_model_len} is below data.max_prompt_length + "
               f"data.max_response_length = {context}", f"set it to {context}")
    if agent is not None and agent > context:
        r.fail("swe.agent.limits.context_tokens", f"{agent} exceeds the rollout's {context}", f"at most {context}")
    if context > reach:
        r.fail("actor_rollout_ref.model.override_config", f"the trainer's RoPE reaches {reach} positions and the "
               f"context is {context}: positions past {reach} train unscaled, silently",
               f"RoPE scaling that reaches {context}: {YARN_FIX}")
    r.checks.append(f"context {context} = prompt {rollout.prompt_length} + response {rollout.response_length}; "
                    f"rollout.max_model_len {rollout.max_model_len}; trainer RoPE reach {reach}")


def _explain(stage: str, error: BaseException) -> tuple[str, str]:
    """(key, fix) for a refusal of verl's server or vLLM."""
    text = str(error)
    hf = "actor_rollout_ref.rollout.engine_kwargs.vllm.hf_overrides"
    if "should be less than or equal to max_position_embeddings" in text:
        return ("actor_rollout_ref.model.override_config.max_position_embeddings",
                "verl checks rollout.max_model_len against the trainer's HF config (override_config applied); with "
                f"YaRN max_position_embeddings is the scaled context: set it there and in hf_overrides ({YARN_FIX})")
    if "derived max_model_len" in text:
        return f"{hf}.max_position_embeddings", f"vLLM derives its limit from the overridden config: {YARN_FIX}"
    if "rope" in text.lower() or isinstance(error, KeyError):
        return (f"{hf}.rope_scaling / rope_parameters", "on transformers 5 the override replaces the model's RoPE "
                f"mapping whole: give it rope_type and rope_theta ({YARN_FIX})")
    return "actor_rollout_ref.rollout", f"the key in {stage}'s message"


def _rollout_engine(cfg: DictConfig, model, r: Rehearsal):
    from verl_swe.trainer.rehearse_vllm import EngineRehearsalError, engine_config, server_args
    from verl_swe.trainer.rope import rope_differences

    try:
        args, _ = server_args(cfg)
        r.checks.append(f"verl vLLMHttpServer: _validate_configs, server args (max_model_len {args.max_model_len}, "
                        f"hf_overrides {json.dumps(args.hf_overrides)})")
        vllm_config, notes = engine_config(args)
    except EngineRehearsalError as e:
        key, fix = _explain(e.stage, e.error)
        r.fail(key, f"{e.stage}: {type(e.error).__name__}: {e.error}", fix)
        return None
    mc = vllm_config.model_config
    r.checks.append(f"vLLM engine config ({'; '.join(notes)}): max_model_len {mc.max_model_len}, "
                    f"RoPE {_rope_text(mc.hf_config)}")
    for diff in rope_differences(model.hf_config, mc.hf_config):
        r.fail("actor_rollout_ref.rollout.engine_kwargs.vllm.hf_overrides", f"trainer and rollout RoPE differ: {diff}",
               YARN_FIX)
    if not any(f.key.endswith("hf_overrides") for f in r.findings):
        r.checks.append("RoPE: trainer (HF) and rollout (vLLM) build the same rotary embedding")
    return vllm_config


def _stop_tokens(cfg: DictConfig, model, rollout, r: Rehearsal, vllm_ok: bool) -> None:
    from verl_swe.agent.config import AgentConfig
    from verl_swe.agent.stop_tokens import generation_config_eos, stop_token_ids
    from verl_swe.agent.tokens import ChatTokens
    from verl_swe.tools import get_tool_set

    agent = AgentConfig.model_validate(OmegaConf.to_container(cfg.swe.agent, resolve=True))
    tools = get_tool_set(agent.tool_set)
    tok = model.tokenizer
    chat = ChatTokens(tok, tools.schemas(), tools.observation_role, agent.chat_template_kwargs)
    stops = stop_token_ids(tok, chat.end_of_turn_id)
    ends = set(generation_config_eos(model.local_hf_config_path)) | {tok.eos_token_id}
    if missing := ends - set(stops):
        r.fail("swe.agent (stop tokens)", f"the model ends text with {sorted(ends)}, the agent stops on {list(stops)}",
               "verl_swe/agent/stop_tokens.py reads generation_config.json next to the tokenizer: ship it with the model")
    if vllm_ok:
        # What verl's vLLMHttpServer.generate builds from the agent loop's sampling params (verl_loop.py).
        from vllm import SamplingParams

        from verl_swe.agent.llm import Sampling

        sent = {"temperature": rollout.temperature, "top_p": rollout.top_p, "top_k": rollout.top_k,
                "repetition_penalty": 1.0, **Sampling(max_tokens=agent.limits.max_new_tokens,
                                                      stop_token_ids=stops).as_dict()}
        params = SamplingParams(**sent)
        if missing := ends - set(params.stop_token_ids or []):
            r.fail("swe.agent (stop tokens)", f"vLLM's SamplingParams stops on {params.stop_token_ids}, not {missing}",
                   "pass stop_token_ids in the agent's sampling params")
    else:
        r.skip("stop tokens through vLLM's SamplingParams", "the vLLM engine config was not built")
    names = ", ".join(f"{i} {tok.convert_ids_to_tokens(i)}" for i in stops)
    r.checks.append(f"stop tokens the agent sends{' (as vLLM SamplingParams)' if vllm_ok else ''}: {names}")


def _prompt_lengths(cfg: DictConfig, model, r: Rehearsal) -> set[str]:
    """verl left-truncates a prompt longer than rollout.prompt_length without an error (the trainer then
    scores another context than the one sampled): measure what the agent renders, tool schemas included.
    Returns the data keys whose files were measured."""
    from verl_swe.trainer.prompt_lengths import agent_prompt_lengths

    limit = cfg.data.max_prompt_length
    measured: set[Path] = set()
    keys: set[str] = set()
    for key in ("train_files", "val_files"):
        files = OmegaConf.select(cfg, f"data.{key}")
        for f in [files] if isinstance(files, str) else list(files or []):
            path = Path(str(f)).expanduser()
            if path.suffix != ".parquet" or not path.exists():
                why = "not a local .parquet" if path.suffix != ".parquet" else "no such file here"
                r.skip(f"agent prompt lengths of data.{key} {f}", f"{why}; verl would left-truncate a prompt longer "
                       f"than data.max_prompt_length={limit} without an error")
                continue
            keys.add(key)
            if path.resolve() in measured:
                continue
            measured.add(path.resolve())
            lengths = agent_prompt_lengths(path, cfg.swe.agent, model.tokenizer)
            over = [(n, iid, length) for n, (iid, length) in enumerate(lengths) if length > limit]
            longest = max((length for _, length in lengths), default=0)
            if over:
                n, iid, length = max(over, key=lambda x: x[2])
                r.fail("data.max_prompt_length", f"{len(over)} of {len(lengths)} rows of data.{key} {path} render "
                       f"longer than {limit} tokens as the agent sends them (longest: row {n}, {iid}, {length}); verl "
                       "would left-truncate them", f"raise it to >= {length} (and lower data.max_response_length by "
                       "as much), or drop those tasks")
            else:
                r.checks.append(f"data.{key}: {len(lengths)} agent prompts <= {limit} tokens (longest {longest})")
    if not OmegaConf.select(cfg, "data.train_files"):
        r.skip("agent prompt lengths", "data.train_files is not set")
    return keys
