"""The token ids that end a turn, sent as `stop_token_ids` with every generation request.

vLLM stops on the tokenizer's EOS and, with `generation_config="auto"`, on the EOS list of the model's
generation_config.json. verl's rollout runs vLLM with `generation_config="vllm"` (no sampling defaults from
the model: the paper's unbiased sampling, P1 Sec. 5.2), which drops that list too: Qwen2.5-Instruct would
stop on <|im_end|> (151645) only and run on past an <|endoftext|> (151643), which it also emits. So the
agent names every end token itself: the chat template's end of turn, the tokenizer's EOS, and the EOS list
of the generation_config.json next to the tokenizer (verl loads the tokenizer from the model's folder).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


def generation_config_eos(folder: str | Path | None) -> list[int]:
    """The `eos_token_id` list of `folder`/generation_config.json ([] when there is none)."""
    path = Path(str(folder)) / "generation_config.json" if folder else None
    if path is None or not path.is_file():
        return []
    try:
        eos = json.loads(path.read_text()).get("eos_token_id")
    except (OSError, ValueError) as e:
        logger.warning("unreadable %s (%s): stopping on the tokenizer's end tokens only", path, e)
        return []
    return [int(i) for i in (eos if isinstance(eos, list) else [eos]) if i is not None]


def stop_token_ids(tokenizer: Any, end_of_turn_id: int) -> tuple[int, ...]:
    ids = [end_of_turn_id, getattr(tokenizer, "eos_token_id", None),
           *generation_config_eos(getattr(tokenizer, "name_or_path", None))]
    return tuple(dict.fromkeys(i for i in ids if i is not None))  # ordered, no duplicates
