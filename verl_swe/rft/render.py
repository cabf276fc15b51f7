"""A resolved trajectory as SFT data: its messages (verl's multi-turn `messages` format), which assistant
turns are trained, and the token ids, built with the agent loop's own `ChatTokens` so the SFT trainer
sees exactly the ids the RL rollout produced: each assistant turn is the ids the model sampled (recorded in
`Turn.token_ids`), not a re-encoding of its text, which differs where the policy sampled a non-canonical
tokenization (e.g. a word as two tokens the tokenizer would merge). Only a trajectory that recorded no ids
(an older one) is re-encoded.

P1 Sec. 4.2 / Fig. 2: an assistant turn that triggered a format error stays in the context with loss
mask 0; every other assistant turn (its text and its end-of-turn token) has mask 1. Prompts and
observations are never trained.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from verl_swe.agent.tokens import ChatTokens
from verl_swe.rft.demo import DemoError, strip_demo
from verl_swe.tools import get_tool_set
from verl_swe.types import ExitStatus, Trajectory


class ShapeError(ValueError):
    """The trajectory's messages and turns do not line up the way the agent loop writes them."""


@dataclass
class SFTExample:
    messages: list[dict]  # system (demonstration removed), task, then assistant / observation in turn
    assistant_loss_mask: list[int]  # one flag per assistant message, in order
    tools: list[dict] | None  # the tool schemas the chat template was given (native tool calls)
    observation_role: str
    demo_stripped: bool = False
    # Per assistant message, the ids the model sampled for it (as Turn.token_ids records them), or None.
    assistant_token_ids: list[list[int] | None] | None = None

    def row(self) -> dict:
        """The parquet row (tools and ids as JSON text: tool schemas differ in shape, a parquet struct would not;
        a list of id lists, some null, is kept whole as text)."""
        return {"messages": self.messages, "assistant_loss_mask": self.assistant_loss_mask,
                "tools_json": json.dumps(self.tools), "observation_role": self.observation_role,
                "assistant_token_ids_json": json.dumps(self.assistant_token_ids)}


def sft_example(traj: Trajectory) -> SFTExample:
    name = traj.metadata.get("tool_set")
    if not name:
        raise ShapeError("metadata has no tool_set (the agent runner records it)")
    try:
        tools = get_tool_set(name)
    except (KeyError, ImportError, AttributeError) as e:
        raise ShapeError(f"tool set {name!r} cannot be loaded: {e}") from None
    messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in traj.messages]
    stripped = False
    if messages and messages[0]["role"] == "system":
        try:
            messages[0]["content"], stripped = strip_demo(messages[0]["content"])
        except DemoError as e:
            raise ShapeError(str(e)) from None
    assistant = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    if not assistant:
        raise ShapeError("no assistant message")
    for i in assistant:
        follows = messages[i + 1]["role"] if i + 1 < len(messages) else None
        if follows not in (None, tools.observation_role):
            raise ShapeError(f"message {i + 1} has role {follows!r}; the {name} tool set observes as "
                             f"{tools.observation_role!r}")
    if assistant[-1] != len(messages) - 1:
        raise ShapeError("the conversation ends with an observation, not an assistant message")
    if assistant[0] == 0:
        raise ShapeError("no prompt before the first assistant message")
    turns = traj.turns
    # A turn cut by the context or the server is recorded but never entered the conversation (agent/episode.py).
    if len(turns) == len(assistant) + 1 and traj.exit_status in (ExitStatus.CONTEXT_EXHAUSTED,
                                                                 ExitStatus.GENERATION_CUT):
        turns = turns[:-1]
    if len(turns) != len(assistant):
        raise ShapeError(f"{len(turns)} turns but {len(assistant)} assistant messages")
    mask = [0 if t.format_error else 1 for t in turns]
    sampled = [list(t.token_ids) if t.token_ids is not None else None for t in turns]
    return SFTExample(messages, mask, tools.schemas(), tools.observation_role, stripped,
                      sampled if any(ids is not None for ids in sampled) else None)


def token_ids(chat: ChatTokens, messages: list[dict], assistant_loss_mask: list[int],
              assistant_ids: list[list[int] | None] | None = None) -> tuple[list[int], list[int]]:
    """(input_ids, loss_mask) as the rollout built them: the prompt with its generation prompt, then per
    turn the assistant's tokens and end-of-turn, then the observation as the template's delta. An assistant
    turn's tokens are its sampled ids (`assistant_ids`, where recorded), else its text re-encoded."""
    first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    ids = chat.prompt(messages[:first])
    mask = [0] * len(ids)
    turn = 0
    for m in messages[first:]:
        if m["role"] == "assistant":
            own = assistant_ids[turn] if assistant_ids and turn < len(assistant_ids) else None
            part = (sampled_content(chat, own, m["content"]) if own is not None
                    else chat.tok.encode(m["content"], add_special_tokens=False)) + [chat.end_of_turn_id]
            ids += part
            mask += [int(assistant_loss_mask[turn])] * len(part)
            turn += 1
        else:
            part = chat.observation(m["content"])
            ids += part
            mask += [0] * len(part)
    if turn != len(assistant_loss_mask):
        raise ShapeError(f"{turn} assistant messages but {len(assistant_loss_mask)} loss flags")
    return ids, mask


def sampled_content(chat: ChatTokens, sampled: list[int], text: str) -> list[int]:
    """A turn's sampled ids without the end-of-turn token the model closed it with (added back after, as the
    rollout closes a turn the model left open); they must decode to the turn's text, as the agent decoded them."""
    ids = sampled[:-1] if sampled and sampled[-1] == chat.end_of_turn_id else list(sampled)
    if chat.tok.decode(ids) != text:
        raise ShapeError("an assistant turn's recorded token ids do not decode to its text (another tokenizer, "
                         "or an edited trajectory)")
    return ids


def reencoding_differs(chat: ChatTokens, messages: list[dict], assistant_ids: list[list[int] | None] | None) -> int:
    """How many assistant turns' sampled ids differ from their text re-encoded: the turns an SFT built from text
    would train on ids the policy never produced."""
    texts = [m["content"] for m in messages if m["role"] == "assistant"]
    return sum(own is not None and sampled_content(chat, own, text) != chat.tok.encode(text, add_special_tokens=False)
               for own, text in zip(assistant_ids or [], texts))
