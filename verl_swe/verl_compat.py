"""verl 0.9.1 with transformers 5: model config overrides that are mappings (`rope_scaling`).

verl applies `actor_rollout_ref.model.override_config` (and the SFT trainer's `model.override_config`) with
`verl.utils.model.update_model_config`, which recurses into every mapping with getattr. On transformers 5 a
RoPE setting is a plain dict (`rope_parameters`; `rope_scaling` is its old name), so the paper's YaRN
override (P1 App. C: x2 for 65k, x4 for 131k) dies with `'dict' object has no attribute 'type'`. This
merges mapping values into dict attributes instead, and writes `rope_scaling` into `rope_parameters`
(`type` -> `rope_type`, the model's rope_theta kept), which is where transformers 5 reads it.
Patched right after verl.utils.model executes, before verl's config classes import the name.
"""

from __future__ import annotations

from collections.abc import Mapping

from verl_swe.import_hooks import after_import


def _rope_parameters(config, rope_scaling: Mapping) -> dict:
    params = dict(getattr(config, "rope_parameters", None) or {})
    new = dict(rope_scaling)
    if "type" in new:
        new["rope_type"] = new.pop("type")
    params.update(new)
    return params


def update_model_config(module_config, override_config_kwargs) -> None:
    for key, val in override_config_kwargs.items():
        current = getattr(module_config, key, None)
        if not isinstance(val, Mapping):
            setattr(module_config, key, val)
        elif key == "rope_scaling" and hasattr(module_config, "rope_parameters"):
            module_config.rope_parameters = _rope_parameters(module_config, val)
        elif current is None or isinstance(current, dict):
            setattr(module_config, key, {**(current or {}), **dict(val)})
        else:  # a nested config object (e.g. text_config of a multimodal model): verl's recursion
            update_model_config(current, val)


def _patch(model_utils) -> None:
    model_utils.update_model_config = update_model_config


after_import("verl.utils.model", _patch)
