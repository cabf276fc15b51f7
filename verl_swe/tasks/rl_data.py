"""verl's RL dataset from tasks: one parquet row per task, read by `RLHFDataset` and the `swe_agent` loop.

A row holds what verl's dataset and agent loop read: `prompt` (the chat the agent opens with, from the
agent's own templates, so verl's prompt-length filter sees realistic lengths), `agent_name: swe_agent`
(selects `verl_swe.agent.verl_loop.SWEAgentLoop`), `data_source`, `ability`, `reward_model` (verl's
reward managers expect the key; the reward itself comes from grading in the agent loop) and
`extra_info` with `index`, `instance_id` and `task`, the task row as JSON (the loop accepts a mapping or
a JSON string; a string keeps the parquet schema the same whatever keys rows' `meta` carry).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from verl_swe.tasks.schema import Task

AGENT_NAME = "swe_agent"
_MESSAGE = [("role", "string"), ("content", "string")]


def _schema():
    import pyarrow as pa

    return pa.schema([
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct(_MESSAGE))),
        ("ability", pa.string()),
        ("agent_name", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        ("extra_info", pa.struct([("index", pa.int64()), ("instance_id", pa.string()), ("split", pa.string()),
                                  ("task", pa.string())])),
    ])


def rl_row(task: Task, index: int, *, data_source: str = "swe-rebench", tool_set: str = "paper",
           split: str = "train", workdir: str = "/testbed") -> dict:
    """One row of verl's RL parquet for `task`; the prompt is the agent's system and first user message."""
    # The agent's templates live with the agent; imported here so `verl_swe.tasks` alone stays light.
    from verl_swe.agent.prompts import INSTANCE_TEMPLATE, system_prompt
    from verl_swe.tools import get_tool_set

    user = INSTANCE_TEMPLATE.format(repo=task.repo, workdir=workdir, problem_statement=task.problem_statement)
    return {
        "data_source": data_source,
        "prompt": [{"role": "system", "content": system_prompt(get_tool_set(tool_set).instructions())},
                   {"role": "user", "content": user}],
        "ability": "swe",
        "agent_name": AGENT_NAME,
        "reward_model": {"style": "rule", "ground_truth": task.instance_id},
        "extra_info": {"index": index, "instance_id": task.instance_id, "split": split,
                       "task": task.model_dump_json()},
    }


def write_rl_parquet(tasks: Iterable[Task], path: str | Path, *, data_source: str = "swe-rebench",
                     tool_set: str = "paper", split: str = "train", workdir: str = "/testbed") -> Path:
    """Write `tasks` as verl's RL parquet at `path` (atomically: an interrupted write leaves no half file).
    `tool_set` picks the system prompt's tool instructions (`paper` or `native`), as in the agent's config."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    rows = [rl_row(t, i, data_source=data_source, tool_set=tool_set, split=split, workdir=workdir)
            for i, t in enumerate(tasks)]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(pa.Table.from_pylist(rows, schema=_schema()), tmp)
    os.replace(tmp, path)
    return path
