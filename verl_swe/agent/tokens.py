"""Token-in/token-out bookkeeping: the model's own tokens are kept; observations are appended as the
chat template's delta, tokenized alone. Nothing already in the context is re-rendered or re-tokenized,
so the per-turn cost depends on the observation, not on the context length.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_SYS, _USER, _ASSISTANT, _OBS = "\x00S\x00", "\x00U\x00", "\x00A\x00", "\x00O\x00"


class TemplateError(ValueError):
    pass


class ChatTokens:
    """How one tokenizer's chat template frames turns, learned once by rendering sentinel messages."""

    def __init__(self, tokenizer: Any, tools: list[dict] | None = None, observation_role: str = "user",
                 template_kwargs: dict | None = None):
        self.tok = tokenizer
        self.tools = tools
        self.role = observation_role
        self.kw = template_kwargs or {}
        # An assistant turn followed by an observation, as every generation point looks: templates that
        # treat the last assistant message specially (Qwen3's empty think block) render it as history.
        probe = [{"role": "system", "content": _SYS}, {"role": "user", "content": _USER},
                 {"role": "assistant", "content": _ASSISTANT}, {"role": observation_role, "content": _OBS}]
        rendered = self._render(probe, add_generation_prompt=True)
        end = rendered.index(_ASSISTANT) + len(_ASSISTANT)
        tail = rendered[end:]
        # The end-of-turn token the model emits to stop (Qwen: <|im_end|>): the first token after an
        # assistant message. It is among the generated tokens when the model stops by itself.
        first = self.tok.encode(tail, add_special_tokens=False)[:1]
        if not first or first[0] not in set(self.tok.all_special_ids):
            first = [self.tok.eos_token_id]
        self.end_of_turn_id: int = first[0]
        eot_text = self.tok.decode([self.end_of_turn_id])
        if not tail.startswith(eot_text):
            raise TemplateError(f"the template does not end assistant turns with {eot_text!r}")
        self._before, _, self._after = tail[len(eot_text):].partition(_OBS)
        if _OBS in self._after or not self._after:
            raise TemplateError("could not locate the observation in the rendered template")

    def _render(self, messages: list[dict], add_generation_prompt: bool) -> str:
        return self.tok.apply_chat_template(messages, tools=self.tools, tokenize=False,
                                            add_generation_prompt=add_generation_prompt, **self.kw)

    def prompt(self, messages: list[dict]) -> list[int]:
        """The tokens of the first messages (system, task) with the generation prompt."""
        return self.tok.encode(self._render(messages, add_generation_prompt=True), add_special_tokens=False)

    def observation(self, text: str) -> list[int]:
        """The tokens that follow a finished assistant turn: the observation and the next generation prompt."""
        return self.tok.encode(self._before + text + self._after, add_special_tokens=False)

    def render(self, messages: list[dict]) -> str:
        """The whole conversation as the template renders it (for checks and for SFT)."""
        return self._render(messages, add_generation_prompt=False)


@dataclass
class TokenTrace:
    """prompt + response tokens of one episode, with the mask (1 = generated) and aligned log-probs."""

    prompt_ids: list[int]
    ids: list[int] = field(default_factory=list)  # prompt then response: one list, extended in place
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)

    def __post_init__(self):
        self.ids = list(self.prompt_ids)

    @property
    def total(self) -> int:
        return len(self.ids)

    def add_generated(self, token_ids: list[int], logprobs: list[float] | None) -> None:
        self.ids.extend(token_ids)
        self.mask.extend([1] * len(token_ids))
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(token_ids))

    def add_context(self, token_ids: list[int]) -> None:
        """Tokens the model did not generate (observations, a closing end-of-turn): mask 0."""
        self.ids.extend(token_ids)
        self.mask.extend([0] * len(token_ids))
        self.logprobs.extend([0.0] * len(token_ids))

    @property
    def response_ids(self) -> list[int]:
        return self.ids[len(self.prompt_ids):]
