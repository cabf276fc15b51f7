"""Which decoding an episode run samples with: `--decoding rollout|model-defaults|KEY=VALUE ...`.

- `rollout`: temperature 1 with every filter off, the training rollout's setting (P1 Sec. 5.2, App. C); the
  default of `verl-swe rollout` and of training.
- `model-defaults`: the sampling values of the model's `generation_config.json` (P1 Sec. 4.1 / paper 1.8: "all
  models use the default decoding parameters of their HF configs"; Qwen2.5-Instruct: temperature 0.7, top_p 0.8,
  top_k 20, repetition_penalty 1.05); the default of `verl-swe eval`. The file is read from the model's folder
  (the served model's name or `--tokenizer`, when a path), else from the bundled model cards for hub ids
  (verl_swe/trainer/model_cards/), or from `model-defaults=PATH`. As vLLM's `generation_config="auto"` does,
  a key the file does not set keeps its neutral value; `do_sample: false` means greedy, as in transformers.
- `KEY=VALUE`: one value on top of the base (temperature, top_p, top_k, min_p, repetition_penalty, and the
  vLLM sampling keys in `EXTRA_KEYS`).

Every value is then sent explicitly with each request (verl_swe/agent/llm_openai.py), so what the report says
is what the server sampled with, whatever the server's own defaults.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_swe.agent.llm import Sampling

ROLLOUT, MODEL_DEFAULTS = "rollout", "model-defaults"
# Sampling's own fields, with the values that switch each one off (the rollout setting).
NEUTRAL: dict[str, float | int] = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0,
                                   "repetition_penalty": 1.0}
EXTRA_KEYS = {"presence_penalty": float, "frequency_penalty": float, "seed": int}  # vLLM SamplingParams, passed through
_TYPES = {"temperature": float, "top_p": float, "top_k": int, "min_p": float, "repetition_penalty": float, **EXTRA_KEYS}


class DecodingError(ValueError):
    pass


@dataclass(frozen=True)
class Decoding:
    base: str  # rollout | model-defaults
    values: dict[str, Any]  # every key of NEUTRAL, plus any EXTRA_KEYS set
    source: str  # where the base values came from
    from_file: dict[str, Any] = field(default_factory=dict)  # model-defaults: the values the file set
    overrides: dict[str, Any] = field(default_factory=dict)

    def sampling(self, max_tokens: int) -> Sampling:
        own = {k: self.values[k] for k in NEUTRAL}
        return Sampling(max_tokens=max_tokens, **own, extra={k: v for k, v in self.values.items() if k not in NEUTRAL})

    def describe(self) -> str:
        vals = ", ".join(f"{k}={v}" for k, v in self.values.items())
        extra = f"; from {self.source}: {_kv(self.from_file) or 'nothing set'}" if self.base == MODEL_DEFAULTS else ""
        over = f"; overridden: {_kv(self.overrides)}" if self.overrides else ""
        return f"decoding {self.base}: {vals}{extra}{over}"

    def to_dict(self) -> dict[str, Any]:
        return {"base": self.base, "values": dict(self.values), "source": self.source,
                "from_file": dict(self.from_file), "overrides": dict(self.overrides)}


def _kv(d: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in d.items())


def resolve_decoding(spec: list[str] | None, default: str, model: str | None = None,
                     tokenizer: str | None = None) -> Decoding:
    """The decoding `spec` (items as the repeatable `--decoding` gives them; each may hold several, split on
    spaces or commas) names: at most one base (`default` when none), then KEY=VALUE overrides in order."""
    items = [part for item in (spec or []) for part in item.replace(",", " ").split()]
    bases = [i for i in items if "=" not in i or i.startswith(MODEL_DEFAULTS + "=")]
    if len(bases) > 1:
        raise DecodingError(f"one base decoding at most, got {bases}")
    base = bases[0] if bases else default
    overrides = {}
    for item in items:
        if item in bases:
            continue
        key, _, raw = item.partition("=")
        if key not in _TYPES:
            raise DecodingError(f"unknown decoding key {key!r} (known: {', '.join(_TYPES)})")
        try:
            overrides[key] = _TYPES[key](raw)
        except ValueError:
            raise DecodingError(f"{item!r}: {key} takes a number") from None
    values: dict[str, Any] = dict(NEUTRAL)
    from_file: dict[str, Any] = {}
    if base == ROLLOUT:
        source = "the training rollout's setting: temperature 1, every filter off (P1 App. C)"
    elif base.startswith(MODEL_DEFAULTS):
        path = Path(base.partition("=")[2]) if "=" in base else generation_config_path(model, tokenizer)
        if path.is_dir():
            path = path / "generation_config.json"
        from_file = model_defaults(path)
        values.update(from_file)
        base, source = MODEL_DEFAULTS, str(path)
    else:
        raise DecodingError(f"unknown decoding {base!r} (rollout, model-defaults[=PATH] or KEY=VALUE)")
    values.update(overrides)
    return Decoding(base, values, source, from_file, overrides)


def generation_config_path(model: str | None, tokenizer: str | None = None) -> Path:
    """The generation_config.json of the model: in its folder (the model or tokenizer, when a local path), else
    the bundled model card of a hub id."""
    from verl_swe.trainer.model_cards import card_dir

    names = [n for n in (model, tokenizer) if n]
    for name in names:
        if (Path(name).expanduser() / "generation_config.json").is_file():
            return Path(name).expanduser() / "generation_config.json"
    for name in names:
        folder = card_dir(name)
        if folder is not None:
            return folder / "generation_config.json"
    raise DecodingError(f"no generation_config.json for {' / '.join(names) or 'the model'} (not a model folder, "
                        "nor a bundled model card): pass --decoding model-defaults=PATH, --tokenizer MODEL_DIR, "
                        "or the values (--decoding rollout temperature=0.7 ...)")


def model_defaults(path: Path) -> dict[str, Any]:
    """The sampling values a generation_config.json sets (only those it sets)."""
    try:
        cfg = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise DecodingError(f"cannot read {path}: {e}") from None
    values = {k: _TYPES[k](cfg[k]) for k in NEUTRAL if cfg.get(k) is not None}
    if cfg.get("do_sample") is False:  # transformers: greedy, whatever temperature says
        values["temperature"] = 0.0
    return values
