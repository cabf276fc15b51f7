"""The one-shot demonstration of RFT collection (P1 Sec. 4.2: a solved toy task appended to the system
prompt while sampling the initial model; neither the RFT nor the RL model ever sees it).

It is appended between fixed marker lines, so `build` can remove it exactly and the training data has
the system prompt the RL agent uses.
"""

from __future__ import annotations

import json
from pathlib import Path

from verl_swe.types import Trajectory

DEMO_OPEN = "--- DEMONSTRATION: a different task, solved in the required format. It is not your task. ---"
DEMO_CLOSE = "--- END OF DEMONSTRATION ---"
_SEP = "\n\n"


class DemoError(ValueError):
    pass


def render_demo(traj: Trajectory) -> str:
    """A trajectory as plain text: its task, then each response and the observation it got. Its own
    system prompt is left out (the agent's system prompt is the one the demonstration is appended to)."""
    parts = []
    for m in (m for m in traj.messages if m["role"] != "system"):
        # the first message is the task; every later non-assistant message is an observation
        label = "RESPONSE" if m["role"] == "assistant" else ("OBSERVATION" if parts else "TASK")
        parts.append(f"[{label}]\n{m['content']}")
    if not any(m["role"] == "assistant" for m in traj.messages):
        raise DemoError(f"demonstration {traj.instance_id}/{traj.episode_id} has no assistant turn")
    return _SEP.join(parts)


def load_demo(path: Path) -> str:
    """A trajectory JSON (rendered with `render_demo`) or a text file (used as it is)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise DemoError(f"--demo {path}: {e}") from None
    if path.suffix == ".json":
        try:
            return render_demo(Trajectory.from_dict(json.loads(text)))
        except (ValueError, TypeError, KeyError) as e:
            raise DemoError(f"--demo {path}: not a trajectory JSON ({type(e).__name__}: {e})") from None
    if not text.strip():
        raise DemoError(f"--demo {path}: the file is empty")
    return text.strip()


def with_demo(system_prompt: str, demo: str, special_tokens: list[str] = ()) -> str:
    """`system_prompt` with the demonstration appended between the markers."""
    for marker in (DEMO_OPEN, DEMO_CLOSE):
        if marker in demo or marker in system_prompt:
            raise DemoError(f"the demonstration or system prompt already contains the marker {marker!r}")
    # A special token written as text would be tokenized as the token itself and break the chat framing.
    found = [t for t in special_tokens if t in demo]
    if found:
        raise DemoError(f"the demonstration contains the tokenizer's special tokens {found}; remove them")
    return f"{system_prompt}{_SEP}{DEMO_OPEN}\n{demo}\n{DEMO_CLOSE}"


def strip_demo(system_prompt: str) -> tuple[str, bool]:
    """(the prompt without its demonstration, whether there was one)."""
    start = system_prompt.find(DEMO_OPEN)
    if start < 0:
        return system_prompt, False
    end = system_prompt.find(DEMO_CLOSE, start)
    if end < 0 or not system_prompt[:start].endswith(_SEP):
        raise DemoError("the system prompt has a malformed demonstration block (markers not as collect writes them)")
    return system_prompt[: start - len(_SEP)] + system_prompt[end + len(DEMO_CLOSE):], True
