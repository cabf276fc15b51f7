"""How long each task's first prompt is as the agent sends it: its system prompt and the task message, with
the tool set's schemas, through the chat template (ChatTokens, the tokens the rollout starts from).

verl's dataset filter (`data.filter_overlong_prompts`) measures the parquet's `prompt` column without the
agent's tool schemas, and verl's agent loop left-truncates a longer prompt to rollout.prompt_length with a
log line only: the trainer would then score a context the rollout never saw. This measures the real one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def agent_prompt_lengths(path: str | Path, agent_section: Any, tokenizer: Any) -> list[tuple[str, int]]:
    """(instance_id, prompt tokens) for every row of a verl RL parquet (verl_swe/tasks/rl_data.py)."""
    import pyarrow.parquet as pq
    from omegaconf import DictConfig, OmegaConf

    from verl_swe.agent.config import AgentConfig
    from verl_swe.agent.prompts import system_prompt
    from verl_swe.agent.tokens import ChatTokens
    from verl_swe.tools import get_tool_set

    section = OmegaConf.to_container(agent_section, resolve=True) if isinstance(agent_section, DictConfig) \
        else agent_section
    agent = section if isinstance(section, AgentConfig) else AgentConfig.model_validate(section)
    tools = get_tool_set(agent.tool_set)
    chat = ChatTokens(tokenizer, tools.schemas(), tools.observation_role, agent.chat_template_kwargs)
    system = agent.system_prompt or system_prompt(tools.instructions())
    table = pq.read_table(path, columns=["prompt", "extra_info"])
    out = []
    for prompt, info in zip(table.column("prompt").to_pylist(), table.column("extra_info").to_pylist(), strict=True):
        user = next((m["content"] for m in prompt or [] if m["role"] == "user"), "")
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        out.append((str((info or {}).get("instance_id", "?")), len(chat.prompt(messages))))
    return out
