"""The agent's typed config: the keys of its entry in verl's agent_loop_config_path YAML (or of
`verl-swe rollout`). Unknown keys are errors that name the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from verl_swe.agent.episode import EpisodeLimits
from verl_swe.reward.monitor import DEFAULT_ZERO_FLAGS, HACK_FLAGS, HackPolicy


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
    mask_truncated: bool = False  # DeepSWE-style: episodes cut by context, turn cap, clock or a cut generation train on nothing
    soft_penalty_cache_tokens: int = Field(0, ge=0)  # > 0: DAPO Eq. 13 over the response length, this buffer


class PlacementConfig(BaseModel):
    """Where sandboxes run and how infrastructure failures are handled (verl_swe/agent/placement*.py)."""

    model_config = ConfigDict(extra="forbid")
    # The label of this run's sandboxes (docker label / local state): `verl-swe sandbox gc --run RUN`, and the
    # sandbox hosts of a restarted run remove what an earlier one left. Default: the trajectory_dir's name.
    run: str | None = None
    env_prepare: Literal["lazy", "ahead"] = "lazy"  # ahead: never build during training (`verl-swe envs build`)
    prepare_timeout_s: float = Field(7_200.0, gt=0)  # environment + sandbox start, outside the episode's clock
    start_retries: int = Field(2, ge=0)  # a failed sandbox start, again (with backoff; under ray, on other nodes)
    episode_retries: int = Field(1, ge=0)  # an episode ended by a transient infra failure runs again from scratch
    warm_per_image: int = Field(0, ge=0)  # sandboxes kept started per task image in use (the grader takes one)
    max_warm_per_node: int = Field(64, ge=0)
    warm_idle_s: float = Field(300.0, gt=0)  # an image's warm sandboxes close after this long unused
    max_concurrent_starts_per_node: int | None = Field(32, ge=1)  # admission control per node (None: no cap)
    max_concurrent_starts: int | None = Field(None, ge=1)  # ray: across the cluster (a gate actor per run)
    ray_address: str | None = None  # ray: the cluster to join when this process is not in one ("auto", host:port)


class RewardConfig(BaseModel):
    """The reward-hack monitor's policy (verl_swe/reward/monitor.py): every episode is flagged either way."""

    model_config = ConfigDict(extra="forbid")
    on_hack: Literal["flag", "zero"] = "flag"  # zero: the outcome reward R is 0 for an episode with a zero_flags flag
    zero_flags: list[str] = Field(default_factory=lambda: list(DEFAULT_ZERO_FLAGS))

    @model_validator(mode="after")
    def _known_flags(self):
        unknown = sorted(set(self.zero_flags) - set(HACK_FLAGS))
        if unknown:
            raise ValueError(f"reward.zero_flags: unknown flag(s) {unknown}; the monitor raises {list(HACK_FLAGS)}")
        return self

    def policy(self) -> HackPolicy:
        return HackPolicy(self.on_hack, tuple(self.zero_flags))


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool_set: str = "paper"  # a registered name or package.module:Class
    env: str = "swe"  # a registered environment or package.module:Class
    env_options: dict[str, Any] = Field(default_factory=dict)  # extra keyword arguments for the environment
    backend: Literal["docker", "local"] = "docker"
    repos_dir: Path | None = None
    cache_dir: Path | None = None
    sandbox: dict[str, Any] = Field(default_factory=dict)  # template for task sandboxes (limits, ...)
    # local: sandboxes on this process's machine (default); ray: on the cluster's nodes that declare the
    # `verl_swe_sandbox` resource (its amount: sandboxes that node may hold), whichever node runs the episode.
    sandbox_placement: Literal["local", "ray"] = "local"
    placement: PlacementConfig = Field(default_factory=PlacementConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    command_timeout_s: float = Field(120.0, gt=0)
    grade_timeout_s: float = Field(1_800.0, gt=0)
    grade_unsubmitted: bool = False  # paper: the reward is for the submitted patch
    reward: RewardConfig = Field(default_factory=RewardConfig)  # reward-hack monitor: flag, or zero flagged episodes
    overlong: OverlongConfig = Field(default_factory=OverlongConfig)
    trajectory_dir: Path | None = None  # where episodes are saved (none: not saved)
    system_prompt: str | None = None  # default: verl_swe.agent.prompts
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)

    def run_label(self) -> str:
        """The run's sandbox label: `placement.run`, else the trajectory_dir's name, else "verl-swe"."""
        if self.placement.run:
            return self.placement.run
        return self.trajectory_dir.resolve().name if self.trajectory_dir is not None else "verl-swe"
