"""The agent's typed config: the keys of its entry in verl's agent_loop_config_path YAML (or of
`verl-swe rollout`). Unknown keys are errors that name the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from verl_swe.agent.episode import EpisodeLimits


class LimitsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_turns: int = Field(40, ge=1)
    context_tokens: int = Field(65_536, ge=64)
    max_new_tokens: int = Field(4_096, ge=1)
    observation_head_chars: int = Field(8_000, ge=0)
    observation_tail_chars: int = Field(8_000, ge=0)
    timeout_s: float = Field(3_600.0, gt=0)
    max_format_errors: int = Field(5, ge=1)
    penalty_threshold: int = Field(10, ge=0)

    @model_validator(mode="after")
    def _threshold_below_max_turns(self):
        if self.penalty_threshold >= self.max_turns:
            raise ValueError(f"penalty_threshold ({self.penalty_threshold}) must be below max_turns ({self.max_turns})")
        return self

    def build(self) -> EpisodeLimits:
        return EpisodeLimits(**self.model_dump())


class OverlongConfig(BaseModel):
    """Off by default (P1 Sec. 5.2: masking looping trajectories removes their negative signal)."""

    model_config = ConfigDict(extra="forbid")
    mask_truncated: bool = False  # DeepSWE-style: episodes cut by context or turn cap train on nothing
    soft_penalty_cache_tokens: int = Field(0, ge=0)  # > 0: DAPO Eq. 13 over the response length, this buffer


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool_set: str = "paper"  # a registered name or package.module:Class
    env: str = "swe"  # a registered environment or package.module:Class
    env_options: dict[str, Any] = Field(default_factory=dict)  # extra keyword arguments for the environment
    backend: Literal["docker", "local"] = "docker"
    repos_dir: Path | None = None
    cache_dir: Path | None = None
    sandbox: dict[str, Any] = Field(default_factory=dict)  # template for task sandboxes (limits, ...)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    command_timeout_s: float = Field(120.0, gt=0)
    grade_timeout_s: float = Field(1_800.0, gt=0)
    grade_unsubmitted: bool = False  # paper: the reward is for the submitted patch
    overlong: OverlongConfig = Field(default_factory=OverlongConfig)
    trajectory_dir: Path | None = None  # where episodes are saved (none: not saved)
    system_prompt: str | None = None  # default: verl_swe.agent.prompts
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
