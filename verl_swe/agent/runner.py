"""`AgentRunner`: what one process needs to run episodes (tool set, chat tokens, environments), built
once from an `AgentConfig` and shared by every episode of that process."""

from __future__ import annotations

import dataclasses

from verl_swe.agent.config import AgentConfig
from verl_swe.agent.env import get_env_class
from verl_swe.agent.episode import EpisodeResult, run_episode
from verl_swe.agent.llm import LLMClient, Sampling
from verl_swe.agent.prompts import system_prompt
from verl_swe.agent.tokens import ChatTokens
from verl_swe.agent.trajectories import save_trajectory
from verl_swe.tasks import Environments, Task
from verl_swe.tools import get_tool_set


class AgentRunner:
    def __init__(self, config: AgentConfig, tokenizer):
        self.config = config
        self.tools = get_tool_set(config.tool_set)
        self.chat = ChatTokens(tokenizer, self.tools.schemas(), self.tools.observation_role,
                               config.chat_template_kwargs)
        self.envs = Environments(config.backend, repos_dir=config.repos_dir, cache_dir=config.cache_dir,
                                 sandbox=config.sandbox)
        self.limits = config.limits.build()
        self.system_prompt = config.system_prompt or system_prompt(self.tools.instructions())

    def make_env(self, task: Task | dict):
        options = {"command_timeout_s": self.config.command_timeout_s, "grade_timeout_s": self.config.grade_timeout_s,
                   "grade_unsubmitted": self.config.grade_unsubmitted} if self.config.env == "swe" else {}
        return get_env_class(self.config.env).from_row(task, self.envs, **{**options, **self.config.env_options})

    async def run(self, task: Task | dict, llm: LLMClient, sampling: Sampling, episode_id: str | None = None,
                  max_response_tokens: int | None = None) -> EpisodeResult:
        """One episode of `task` (a Task, or a row for a registered non-SWE environment)."""
        instance_id = task.instance_id if isinstance(task, Task) else str(task.get("instance_id", "task"))
        limits = self.limits
        if max_response_tokens is not None:
            limits = dataclasses.replace(limits, max_response_tokens=max_response_tokens)
        result = await run_episode(self.make_env(task), self.tools, llm, self.chat, self.system_prompt, limits,
                                   sampling, instance_id, episode_id)
        result.trajectory.metadata.update({"tool_set": self.tools.name, "env": self.config.env,
                                           "limits": dataclasses.asdict(limits), "sampling": sampling.as_dict()})
        if self.config.trajectory_dir is not None:
            save_trajectory(self.config.trajectory_dir, result.trajectory)
        return result

    def close(self) -> None:
        self.envs.close()
