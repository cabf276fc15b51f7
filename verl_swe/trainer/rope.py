"""The RoPE a model config builds, as parameters and as numbers: what the trainer and the rollout must share.

A rollout sampled with one rotary embedding and a trainer scoring with another gives log-probs of two
different models: importance ratios (P1 Eq. 6) are then noise, and nothing errors. On transformers 5 the
RoPE lives in `rope_parameters` (`rope_type`, `rope_theta` and the scaling keys in one mapping).
"""

from __future__ import annotations

import copy
import importlib
from typing import Any

KEYS = ("rope_type", "rope_theta", "factor", "original_max_position_embeddings", "attention_factor", "beta_fast",
        "beta_slow", "mscale", "mscale_all_dim", "partial_rotary_factor", "low_freq_factor", "high_freq_factor")
SCALED_BY_ORIGINAL = {"yarn", "longrope", "llama3"}  # factor x original_max_position_embeddings positions


def rope_parameters(hf_config: Any) -> dict:
    """The RoPE keys of a transformers config that decide the rotary embedding (None values left out)."""
    params = dict(getattr(hf_config, "rope_parameters", None) or getattr(hf_config, "rope_scaling", None) or {})
    if "type" in params and "rope_type" not in params:
        params["rope_type"] = params.pop("type")
    if params.get("rope_theta") is None and getattr(hf_config, "rope_theta", None) is not None:
        params["rope_theta"] = hf_config.rope_theta
    params.setdefault("rope_type", "default")
    return {k: params[k] for k in KEYS if params.get(k) is not None}


def positions_reached(hf_config: Any) -> int:
    """How many positions the RoPE was trained or scaled for: YaRN-style types reach factor x the original
    positions; linear/dynamic scale max_position_embeddings; unscaled RoPE reaches max_position_embeddings."""
    p = rope_parameters(hf_config)
    max_pos = int(getattr(hf_config, "max_position_embeddings", 0) or 0)
    factor = float(p.get("factor") or 1.0)
    if p["rope_type"] in SCALED_BY_ORIGINAL and p.get("original_max_position_embeddings"):
        return int(p["original_max_position_embeddings"] * factor)
    if p["rope_type"] in ("linear", "dynamic"):
        return int(max_pos * factor)
    return max_pos


def rotary(hf_config: Any):
    """(inv_freq, attention_scaling) as the model's own transformers rotary embedding computes them."""
    model_type = hf_config.model_type
    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    names = [n for n in dir(module) if n.endswith("RotaryEmbedding") and not n.startswith("_")]
    if not names:
        raise LookupError(f"no rotary embedding class in {module.__name__}")
    emb = getattr(module, names[0])(copy.deepcopy(hf_config), device="cpu")
    return emb.inv_freq.double(), float(emb.attention_scaling)


def rope_differences(trainer: Any, rollout: Any) -> list[str]:
    """What differs between the trainer's and the rollout's RoPE: parameters first, then the numbers."""
    a, b = rope_parameters(trainer), rope_parameters(rollout)
    diffs = [f"{k}: trainer {a.get(k)!r}, rollout {b.get(k)!r}" for k in KEYS if a.get(k) != b.get(k)]
    if diffs:
        return diffs
    try:
        (fa, sa), (fb, sb) = rotary(trainer), rotary(rollout)
    except Exception as e:  # noqa: BLE001 - a config the model's own class cannot build is a difference too
        return [f"the rotary embedding cannot be built: {type(e).__name__}: {e}"]
    if fa.shape != fb.shape or (fa - fb).abs().max() > 1e-12 * fa.abs().max() or abs(sa - sb) > 1e-12:
        return [f"inverse frequencies / attention scaling differ (scaling {sa} vs {sb})"]
    return []
