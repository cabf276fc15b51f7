"""`verl-swe rft collect`: sample the initial model N times per task with the RL agent loop (P1 Sec. 4.2:
10 runs on each task), saving every trajectory; a rerun resumes (verl_swe.agent.rollout).

The only difference from RL episodes is the optional one-shot demonstration appended to the system
prompt (verl_swe/rft/demo.py). A run directory remembers its demonstration in `rft_collect.json`, so a
resume cannot silently mix episodes sampled with and without it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from verl_swe.agent.config import AgentConfig
from verl_swe.agent.prompts import system_prompt
from verl_swe.files import write_json_atomic, write_text_atomic
from verl_swe.rft.demo import with_demo
from verl_swe.tools import get_tool_set

MANIFEST = "rft_collect.json"


class RunDirMismatch(ValueError):
    pass


def collection_config(cfg: AgentConfig, demo: str | None, special_tokens: list[str] = ()) -> AgentConfig:
    """`cfg` with the demonstration appended to its system prompt (the default one unless set)."""
    if demo is None:
        return cfg
    base = cfg.system_prompt or system_prompt(get_tool_set(cfg.tool_set).instructions())
    return cfg.model_copy(update={"system_prompt": with_demo(base, demo, special_tokens)})


def claim_run_dir(run_dir: Path, demo: str | None, demo_source: str | None, model: str, tool_set: str) -> dict:
    """Record what this run directory samples with; refuse a resume with another demonstration or tool set."""
    run_dir = Path(run_dir)
    manifest = {"demo_sha256": hashlib.sha256(demo.encode()).hexdigest() if demo is not None else None,
                "demo_source": demo_source, "model": model, "tool_set": tool_set}
    path = run_dir / MANIFEST
    if path.is_file():
        before = json.loads(path.read_text())
        for key in ("demo_sha256", "tool_set"):
            if before.get(key) != manifest[key]:
                what = "demonstration" if key == "demo_sha256" else "tool set"
                raise RunDirMismatch(f"{run_dir} was collected with another {what} ({key} {before.get(key)!r}, "
                                     f"now {manifest[key]!r}); resume with the same one or use a new --out")
    elif (run_dir / "trajectories").is_dir() and demo is not None:
        raise RunDirMismatch(f"{run_dir} holds episodes sampled without a recorded demonstration; "
                             f"use a new --out for a collection with --demo")
    write_json_atomic(path, manifest)
    if demo is not None:
        write_text_atomic(run_dir / "demo.txt", demo + "\n")
    return manifest
