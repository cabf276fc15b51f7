"""Checks run before training starts (and by `verl-swe plan`): each problem names the key and the fix.

- every key of the config exists in verl's `ppo_trainer` (a typo would otherwise be ignored silently);
- the agent section is a valid AgentConfig; its context fits the data and rollout lengths;
- rollout sampling is unbiased (P1 Sec. 5.2), unless `swe.allow_biased_sampling=true`;
- the loss is a token mean (Eq. 8); every dataset row carries `agent_name: swe_agent` and a valid task;
- the parallel layout divides and fits (`plan.py`);
- on more than one node, every path a worker on another node reads or writes is absolute (run directory,
  trajectories, model, data): relative ones resolve against each process's own working directory;
- the iterations the run will make (trainer.total_training_steps, not cut short by total_epochs);
- `rehearse.py` (unless swe.rehearse=false): verl's and vLLM's own start-up config logic, the trainer's
  and the rollout's RoPE, stop tokens and the agent's prompt lengths.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from verl_swe.algo.sampling import sampling_problems
from verl_swe.trainer.plan import ACTION_FRACTION, KNOWN_MODELS, Head, Layout, ModelShape, Plan, Workload, make_plan
from verl_swe.trainer.run_checks import iteration_problems, iterations, multinode_path_problems

SYNC_TRAINERS = ("sync", "swe_sync")  # swe_sync: verl's sync trainer, padding spread (spread_trainer.py)

# Sections whose keys are free-form by design (passed through to engines, models or plugins).
FREE_FORM = ("override_config", "engine_kwargs", "sampler_kwargs", "custom_sampler", "reward_kwargs", "hf_overrides",
             "rope_scaling", "ray_kwargs", "runtime_env", "override_transformer_config", "override_optimizer_config")


class PreflightError(ValueError):
    pass


def unknown_keys(config: DictConfig, reference: DictConfig, prefix: str = "") -> list[str]:
    out = []
    for key in config:
        path = f"{prefix}{key}"
        if path == "swe" or path == "hydra":
            continue
        if key not in reference.keys():  # keys(): `in` says False for a mandatory `???` value
            if key not in _dataclass_fields(reference):
                out.append(path)
            continue
        sub, ref = config._get_node(key), reference._get_node(key)  # nodes: no interpolation, no `???` error
        if isinstance(sub, DictConfig) and isinstance(ref, DictConfig) and key not in FREE_FORM:
            out += unknown_keys(sub, ref, f"{path}.")
    return out


def _dataclass_fields(reference: DictConfig) -> set[str]:
    """Fields of the dataclass a config node builds (its `_target_`): verl's YAML omits some of them
    (rollout.enable_sleep_mode, which the CPU pipeline sets), and `+key` is how users add them."""
    import dataclasses
    import importlib

    target = reference.get("_target_") if "_target_" in reference.keys() else None
    if not isinstance(target, str) or "." not in target:
        return set()
    module, _, name = target.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return set()
    return {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()


def verl_reference() -> DictConfig:
    """verl's own `ppo_trainer`, composed by a private config loader so the running Hydra app is untouched."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path
    from hydra.types import RunMode

    loader = ConfigLoaderImpl(config_search_path=create_config_search_path("pkg://verl.trainer.config"))
    cfg = loader.load_configuration("ppo_trainer", overrides=[], run_mode=RunMode.RUN)
    with open_dict(cfg):
        cfg.pop("hydra", None)
    return cfg


def model_shape(path: str, base_model: str | None = None) -> ModelShape | None:
    """The shape of model.path: a local folder's config.json, a bundled model, or else `base_model` (the
    public model an export not written yet descends from, swe.base_model)."""
    cfg = Path(path).expanduser() / "config.json"
    if cfg.exists():
        return ModelShape.from_hf_config(json.loads(cfg.read_text()))
    for name in (path, base_model):
        if name in KNOWN_MODELS:
            return ModelShape.from_hf_config(KNOWN_MODELS[name])
    return None


def _rope_override(config: DictConfig) -> tuple[float, int | None]:
    """(factor, original positions) of the trainer's RoPE override (rope_parameters or its old name rope_scaling)."""
    override = OmegaConf.select(config, "actor_rollout_ref.model.override_config", default=None) or {}
    rope = override.get("rope_parameters") or override.get("rope_scaling") or {}
    return float(rope.get("factor") or 1.0), rope.get("original_max_position_embeddings")


def plan_for(config: DictConfig) -> Plan | None:
    arr = config.actor_rollout_ref
    m = model_shape(str(arr.model.path), OmegaConf.select(config, "swe.base_model", default=None))
    if m is None:
        return None
    rope, original = _rope_override(config)
    if original:  # YaRN-style: the scaled reach is factor x the trained positions, whatever config.json says
        m = dataclasses.replace(m, max_positions=int(original))
    lay = Layout(nnodes=config.trainer.nnodes, gpus_per_node=config.trainer.n_gpus_per_node,
                 gpu_memory_gb=float(OmegaConf.select(config, "swe.gpu_memory_gb", default=80)),
                 sp=arr.actor.fsdp_config.ulysses_sequence_parallel_size, rollout_tp=arr.rollout.tensor_model_parallel_size,
                 gpu_memory_utilization=arr.rollout.gpu_memory_utilization,
                 param_offload=arr.actor.fsdp_config.param_offload, optimizer_offload=arr.actor.fsdp_config.optimizer_offload)
    w = Workload(context=config.data.max_prompt_length + config.data.max_response_length,
                 prompts_per_iteration=config.data.train_batch_size, n=arr.rollout.n,
                 mini_batch_prompts=arr.actor.ppo_mini_batch_size, max_token_len_per_gpu=arr.actor.ppo_max_token_len_per_gpu,
                 rope_scaling=rope, rollout_max_model_len=arr.rollout.max_model_len,
                 logprob_max_token_len_per_gpu=OmegaConf.select(arr, "rollout.log_prob_max_token_len_per_gpu"))
    return make_plan(m, lay, w, head_for(config))


def head_for(config: DictConfig) -> Head:
    """The LM head path the actor's config selects (plan.Head). flash-attn's cross-entropy is not assumed:
    without it verl keeps per-row log_softmax outputs, an upper bound of the in-place kernel."""
    import os

    actor = config.actor_rollout_ref.actor
    get = lambda key, default: OmegaConf.select(actor, key, default=default)  # noqa: E731
    return Head(fused_kernels=bool(OmegaConf.select(config, "actor_rollout_ref.model.use_fused_kernels", default=False)),
                entropy_grad=bool(get("calculate_entropy", False)) or float(get("entropy_coeff", 0.0)) != 0.0,
                entropy_checkpointing=bool(get("entropy_checkpointing", False)),
                entropy_chunking=bool(get("entropy_from_logits_with_chunking", False)),
                entropy_chunk=int(get("entropy_from_logits_chunk_size", 2048)),
                sparse=os.environ.get("VERL_SWE_SPARSE_LM_HEAD", "1") != "0",
                action_fraction=float(OmegaConf.select(config, "swe.plan_action_fraction", default=ACTION_FRACTION)))


def _dataset_problems(config: DictConfig, validate_tasks: bool = True) -> list[str]:
    """Every row of the local train/val parquet files: `agent_name: swe_agent` and a task in extra_info.task
    that loads as a Task (when the agent's env is SWE). A bad row found here costs seconds; found by a rollout
    worker, it would fail a training step hours in."""
    import pyarrow.parquet as pq
    from pydantic import ValidationError

    from verl_swe.tasks import Task
    from verl_swe.tasks.loader import explain_validation_error

    problems = []
    for key in ("train_files", "val_files"):
        files = OmegaConf.select(config, f"data.{key}")
        for f in [files] if isinstance(files, str) else list(files or []):
            path = Path(str(f)).expanduser()
            if path.suffix != ".parquet" or not path.exists():
                continue  # remote or not built yet: checked by verl when it loads
            # only the checked columns: the prompts hold every task's issue text again
            checked = [c for c in ("agent_name", "extra_info") if c in pq.read_schema(path).names]
            table = pq.read_table(path, columns=checked)
            where = f"data.{key} {path}"
            if table.num_rows == 0:
                problems.append(f"{where}: no rows")
                continue
            if "agent_name" not in table.column_names or set(table.column("agent_name").to_pylist()) != {"swe_agent"}:
                problems.append(f"{where}: rows need agent_name: swe_agent (build the dataset with verl-swe's "
                                "dataset builder, or add the column)")
                continue
            bad = []
            extra = table.column("extra_info").to_pylist() if "extra_info" in table.column_names else [None] * len(table)
            for n, info in enumerate(extra):
                task = (info or {}).get("task")
                if not task:
                    bad.append(f"row {n}: no task row in extra_info.task")
                elif validate_tasks:
                    try:
                        Task.model_validate(json.loads(task) if isinstance(task, str) else task)
                    except (ValueError, ValidationError) as e:  # JSON or field errors
                        why = explain_validation_error(e) if isinstance(e, ValidationError) else e
                        bad.append(f"row {n}: extra_info.task: {why}")
            if bad:
                more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
                problems.append(f"{where}: {len(bad)} bad row(s): " + "; ".join(bad[:5]) + more)
    return problems


def preflight(config: DictConfig, check_unknown_keys: bool = True, rehearse: bool | None = None,
              rehearse_engine: bool = True) -> str:
    """Refuse `config` (PreflightError, every problem named) or return the plan's report. `rehearse`: run
    rehearse.py too (default: swe.rehearse); `rehearse_engine=False` leaves out its vLLM part."""
    from pydantic import ValidationError

    from verl_swe.agent.config import AgentConfig

    problems: list[str] = []
    if check_unknown_keys:
        for key in unknown_keys(config, verl_reference()):
            problems.append(f"unknown key {key!r}: not in verl's ppo_trainer config (a typo?)")
    agent = None
    try:
        agent = AgentConfig.model_validate(OmegaConf.to_container(config.swe.agent, resolve=True))
    except ValidationError as e:
        for err in e.errors():
            problems.append(f"swe.agent.{'.'.join(map(str, err['loc']))}: {err['msg']}")
    rollout = config.actor_rollout_ref.rollout
    if agent is not None:
        room = config.data.max_prompt_length + config.data.max_response_length
        if agent.limits.context_tokens > room:
            problems.append(f"swe.agent.limits.context_tokens={agent.limits.context_tokens} exceeds "
                            f"data.max_prompt_length + data.max_response_length = {room}")
    params = {k: rollout.get(k) for k in ("temperature", "top_p", "top_k", "min_p", "repetition_penalty") if k in rollout}
    engine_reads_gen_config = OmegaConf.select(rollout, "engine_kwargs.vllm.generation_config") != "vllm"
    gen_cfg_file = Path(str(config.actor_rollout_ref.model.path)).expanduser() / "generation_config.json"
    gen_cfg = json.loads(gen_cfg_file.read_text()) if gen_cfg_file.exists() else None
    biased = sampling_problems(params, gen_cfg, engine_reads_gen_config)
    if engine_reads_gen_config and gen_cfg is None:
        biased.append("the rollout engine may apply the model's generation_config.json sampling defaults: set "
                      "actor_rollout_ref.rollout.engine_kwargs.vllm.generation_config=vllm")
    if biased and not OmegaConf.select(config, "swe.allow_biased_sampling", default=False):
        problems += [f"biased rollout sampling: {b} (P1 Sec. 5.2; opt in with swe.allow_biased_sampling=true)"
                     for b in biased]
    actor = config.actor_rollout_ref.actor
    if actor.policy_loss.loss_mode == "swe_dapo" and actor.loss_agg_mode != "token-mean":
        problems.append(f"actor_rollout_ref.actor.loss_agg_mode={actor.loss_agg_mode}: swe_dapo (Eq. 8) is a token-mean")
    sampler = OmegaConf.select(config, "trainer.v1.sampler.custom_sampler.path") and \
        OmegaConf.select(config, "trainer.v1.sampler.custom_sampler.name")
    if sampler and config.algorithm.filter_groups.enable:
        problems.append("trainer.v1.sampler.custom_sampler and algorithm.filter_groups are both on; verl ignores "
                        "filter_groups while a custom sampler is set: drop-without-refill or DAPO refill, pick one "
                        "(refill: algorithm.filter_groups.enable=true trainer.v1.sampler.custom_sampler.path=null)")
    if sampler and OmegaConf.select(config, "trainer.v1.trainer_mode") not in SYNC_TRAINERS:
        problems.append(f"trainer.v1.trainer_mode={config.trainer.v1.trainer_mode}: the {sampler} sampler "
                        f"supports the sync trainers only ({', '.join(SYNC_TRAINERS)})")
    problems += _dataset_problems(config, validate_tasks=agent is None or agent.env == "swe")
    problems += multinode_path_problems(config) + iteration_problems(config)
    plan = plan_for(config)
    if plan is not None and OmegaConf.select(config, "swe.plan_check", default=True):
        problems += [f"plan: {e}" for e in plan.errors]
    rehearsal = None
    if OmegaConf.select(config, "swe.rehearse", default=True) if rehearse is None else rehearse:
        from verl_swe.trainer.rehearse import rehearse as run_rehearsal

        rehearsal = run_rehearsal(config, engine=rehearse_engine)
        problems += [f"rehearse: {f}" for f in rehearsal.findings]
    if problems:
        raise PreflightError("\n".join(f"- {p}" for p in problems))
    report = [format_plan(plan) if plan else "plan: model shape unknown (not a local path or a known model); skipped",
              f"iterations: {iterations(config)[1]}"]
    return "\n".join(report + ([f"rehearsal:\n{rehearsal.report()}"] if rehearsal else []))


def format_plan(plan: Plan) -> str:
    width = max(len(k) for k, _ in plan.rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in plan.rows)


def write_agent_loop_config(config: DictConfig, run_dir: Path) -> Path:
    """The agent loop's YAML (verl reads it in every worker), from the one config's `swe.agent` section."""
    entry = {"name": "swe_agent", "_target_": "verl_swe.agent.verl_loop.SWEAgentLoop",
             **OmegaConf.to_container(config.swe.agent, resolve=True)}
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir.resolve() / "agent_loop.yaml"
    OmegaConf.save(OmegaConf.create([entry]), path)
    return path
