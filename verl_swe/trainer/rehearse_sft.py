"""`verl-swe rehearse` for an SFT config (the RFT recipe, rft_qwen72b): verl.trainer.sft_trainer's start-up.

SFTTrainer._build_config and _build_engine, as far as they run without a process group: the model, engine,
optimizer, checkpoint and profiler dataclasses (HFModelConfig with override_config applied to the model's
config.json) and TrainingWorkerConfig; then the context the run needs (data.max_length) against the RoPE the
trainer builds, the sequence-parallel split against the heads and the token budget, and the data file.
Not rehearsed: the dataset's tokenization, weight loading, memory, NCCL.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from verl_swe.trainer.model_cards import MODELS, card_dir, materialize
from verl_swe.trainer.rehearse import YARN_FIX, Rehearsal, _rope_text


def rehearse_sft(config: DictConfig) -> Rehearsal:
    r = Rehearsal()
    with tempfile.TemporaryDirectory(prefix="verl-swe-rehearse-sft-") as tmp:
        path = str(OmegaConf.select(config, "model.path"))
        local = Path(path).expanduser()
        if (local / "config.json").is_file():
            r.model, model_dir = f"{local} (local folder)", local
        elif card_dir(path):
            r.model, model_dir = f"{path} (bundled public config.json)", materialize(path, Path(tmp) / "model")
        else:
            r.fail("model.path", f"{path!r} is neither a local model folder with config.json nor a bundled model",
                   f"point it at a Hugging Face model folder or one of {list(MODELS)}")
            r.skip("SFT trainer configs, context, data", "no model config.json")
            return r
        cfg = copy.deepcopy(config)
        with open_dict(cfg):
            cfg.model.path = str(model_dir)
        OmegaConf.resolve(cfg)
        model = _configs(cfg, r)
        if model is None:
            r.skip("context, sequence parallelism, data", "verl could not build the SFT trainer's configs")
            return r
        _context(cfg, model, r)
        _data(cfg, r)
    return r


def _configs(cfg: DictConfig, r: Rehearsal):
    """SFTTrainer._build_config, then the TrainingWorkerConfig of _build_engine."""
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.engine_workers import TrainingWorkerConfig

    built = {}
    for key in ("model", "engine", "optim", "checkpoint", "profiler"):
        try:
            built[key] = omega_conf_to_dataclass(cfg[key])
        except Exception as e:  # noqa: BLE001
            r.fail(key, f"verl cannot build its config: {type(e).__name__}: {e}", "the field named in the message")
            return None
    try:
        TrainingWorkerConfig(model_type="language_model", model_config=built["model"], engine_config=built["engine"],
                             optimizer_config=built["optim"], checkpoint_config=built["checkpoint"],
                             profiler_config=built["profiler"])
    except Exception as e:  # noqa: BLE001
        r.fail("engine", f"TrainingWorkerConfig: {type(e).__name__}: {e}", "the field named in the message")
        return None
    hf = built["model"].hf_config
    r.checks.append(f"SFT trainer configs ({', '.join(type(b).__name__ for b in built.values())}, TrainingWorkerConfig); "
                    f"override_config applied: max_position_embeddings {hf.max_position_embeddings}, RoPE {_rope_text(hf)}")
    return built["model"]


def _context(cfg: DictConfig, model, r: Rehearsal) -> None:
    from verl_swe.trainer.rope import positions_reached

    length, reach = int(cfg.data.max_length), positions_reached(model.hf_config)
    if length > reach:
        r.fail("model.override_config", f"the trainer's RoPE reaches {reach} positions and data.max_length is "
               f"{length}: positions past {reach} train unscaled", f"RoPE scaling that reaches {length}: {YARN_FIX}")
    sp = int(OmegaConf.select(cfg, "engine.ulysses_sequence_parallel_size", default=1) or 1)
    hf = model.hf_config
    heads, kv = hf.num_attention_heads, getattr(hf, "num_key_value_heads", hf.num_attention_heads)
    if heads % sp or (kv % sp and sp % kv):
        r.fail("engine.ulysses_sequence_parallel_size", f"{heads} attention heads / {kv} KV heads cannot be split "
               f"over {sp} ranks", "a divisor of the heads")
    budget = OmegaConf.select(cfg, "data.max_token_len_per_gpu")
    if OmegaConf.select(cfg, "data.use_dynamic_bsz") and budget and budget * sp < length:
        r.fail("data.max_token_len_per_gpu", f"{budget} x sequence parallel {sp} cannot hold one {length}-token "
               "trajectory", f"at least {-(-length // sp)}")
    r.checks.append(f"context: data.max_length {length}, trainer RoPE reach {reach}; Ulysses {sp} over {heads}/{kv} heads")


def _data(cfg: DictConfig, r: Rehearsal) -> None:
    import pyarrow.parquet as pq

    for key in ("train_files", "val_files"):
        files = OmegaConf.select(cfg, f"data.{key}")
        for f in [files] if isinstance(files, str) else list(files or []):
            path = Path(str(f)).expanduser()
            if path.suffix != ".parquet" or not path.exists():
                r.skip(f"data.{key} {f}", "not a local .parquet here (`verl-swe rft build --out` writes it)")
                continue
            r.checks.append(f"data.{key}: {pq.read_metadata(path).num_rows} rows in {path}")
