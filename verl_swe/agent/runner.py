"""`AgentRunner`: what one process needs to run episodes (tool set, chat tokens, environments, the sandbox
placement), built once from an `AgentConfig` and shared by every episode of that process."""

from __future__ import annotations

import dataclasses
import logging

from verl_swe.agent.config import AgentConfig
from verl_swe.agent.env import get_env_class
from verl_swe.agent.episode import EpisodeResult, run_episode
from verl_swe.agent.infra import TRANSIENT
from verl_swe.agent.llm import LLMClient, Sampling
from verl_swe.agent.placement import make_placement
from verl_swe.agent.prompts import system_prompt
from verl_swe.agent.stop_tokens import stop_token_ids
from verl_swe.agent.tokens import ChatTokens
from verl_swe.agent.trajectories import save_trajectory
from verl_swe.tasks import Environments, Task
from verl_swe.tools import get_tool_set
from verl_swe.types import Trajectory

logger = logging.getLogger(__name__)

class AgentRunner:
    def __init__(self, config: AgentConfig, tokenizer):
        self.config = config
        self.tools = get_tool_set(config.tool_set)
        self.chat = ChatTokens(tokenizer, self.tools.schemas(), self.tools.observation_role,
                               config.chat_template_kwargs)
        self.envs = Environments(config.backend, repos_dir=config.repos_dir, cache_dir=config.cache_dir,
                                 sandbox=config.sandbox)
        self.placement = make_placement(config, self.envs)  # where the swe environment's sandboxes run
        self.limits = config.limits.build()
        self.stop_token_ids = stop_token_ids(tokenizer, self.chat.end_of_turn_id)  # every end token (stop_tokens.py)
        self.system_prompt = config.system_prompt or system_prompt(self.tools.instructions())

    def make_env(self, task: Task | dict):
        options = {"command_timeout_s": self.config.command_timeout_s, "grade_timeout_s": self.config.grade_timeout_s,
                   "grade_unsubmitted": self.config.grade_unsubmitted,
                   "hack_policy": self.config.reward.policy()} if self.config.env == "swe" else {}
        envs = self.placement if self.config.env == "swe" else self.envs
        return get_env_class(self.config.env).from_row(task, envs, **{**options, **self.config.env_options})

    async def run(self, task: Task | dict, llm: LLMClient, sampling: Sampling, episode_id: str | None = None,
                  max_response_tokens: int | None = None) -> EpisodeResult:
        """One episode of `task` (a Task, or a row for a registered non-SWE environment)."""
        instance_id = task.instance_id if isinstance(task, Task) else str(task.get("instance_id", "task"))
        limits = self.limits
        if not sampling.stop_token_ids:
            sampling = dataclasses.replace(sampling, stop_token_ids=self.stop_token_ids)
        if max_response_tokens is not None:
            limits = dataclasses.replace(limits, max_response_tokens=max_response_tokens)
        metadata = {"tool_set": self.tools.name, "env": self.config.env, "limits": dataclasses.asdict(limits),
                    "sampling": sampling.as_dict()}

        def save(traj: Trajectory) -> None:  # every episode, cancelled ones included (marked: not settled)
            traj.metadata.update(metadata)
            versions = getattr(llm, "weight_versions", None)  # verl's server: the weights' global step per turn
            if versions:
                traj.metadata["policy_version"] = max(versions)
            if self.config.trajectory_dir is not None:
                save_trajectory(self.config.trajectory_dir, traj)

        retries, attempts = self.config.placement.episode_retries, []
        while True:
            result = await run_episode(self.make_env(task), self.tools, llm, self.chat, self.system_prompt, limits,
                                       sampling, instance_id, episode_id, self.config.placement.prepare_timeout_s,
                                       on_cancel=save)
            traj = result.trajectory
            if traj.infra_failure not in TRANSIENT or len(attempts) >= retries:
                break
            # Not the agent's doing and maybe not there next time (another node, a restarted engine): run the
            # episode again from scratch; only the last attempt is returned and saved, the others are noted.
            attempts.append({"infra_failure": traj.infra_failure, "error": traj.error, "turns": traj.num_turns,
                             "seconds": traj.timings.get("total_s")})
            logger.warning("episode %s of %s: infra failure (%s), running it again (%d/%d)", traj.episode_id,
                           instance_id, traj.error, len(attempts), retries)
            episode_id = traj.episode_id
        if attempts:
            traj.metadata["infra_attempts"] = attempts
        save(traj)
        return result

    def close(self) -> None:
        self.placement.close()
        self.envs.close()
