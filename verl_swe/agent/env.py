"""Environments the agent acts in, by registered name. `swe`: a task's sandbox, the paper's commands,
and grading of the final patch in a fresh sandbox.

An environment opens with the task text, turns each action into an observation, and scores the
episode at the end. Register another one (a non-SWE environment) with `@register_env("name")`.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable

from verl_swe.types import Action

_ENVS: dict[str, Callable[..., "AgentEnv"]] = {}


def register_env(name: str):
    def wrap(cls):
        _ENVS[name] = cls
        return cls
    return wrap


def get_env_class(name: str) -> Callable[..., "AgentEnv"]:
    if name in _ENVS:
        return _ENVS[name]
    if ":" in name:
        module, _, attr = name.partition(":")
        return getattr(importlib.import_module(module), attr)
    raise KeyError(f"unknown environment {name!r}; registered: {', '.join(sorted(_ENVS))}")


@dataclass
class Step:
    observation: str
    done: bool = False  # the agent submitted


@dataclass
class Outcome:
    resolved: bool = False
    patch: str = ""
    grade: dict[str, Any] | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    infra: str | None = None  # the scoring failed for an infrastructure reason (verl_swe/agent/infra.py)


class AgentEnv(ABC):
    """One episode's world. `prepare` (outside the episode's clock), `start` and `step` may raise SandboxError
    or InfraFailure (the episode then ends with sandbox_error, marked infra when it is not the agent's doing);
    `finish` never raises: failures are reported in `Outcome.error` / `Outcome.infra`."""

    async def prepare(self) -> None:
        """Get ready before the episode's clock starts (build the environment, start the sandbox)."""

    @classmethod
    def from_row(cls, row: Any, environments: Any, **options: Any) -> "AgentEnv":
        """Build the environment of one dataset row (`extra_info.task` in verl's data)."""
        return cls(row, **options)

    @abstractmethod
    async def start(self) -> str:
        """Set up, and return the task text for the first user message."""

    @abstractmethod
    async def step(self, action: Action) -> Step: ...

    def prompt_line(self) -> str:
        return ""

    def placement_info(self) -> dict[str, Any]:
        """Where the episode ran (kept in the trajectory's metadata), e.g. its sandbox's node."""
        return {}

    def review(self, traj: Any) -> None:
        """After scoring: set `traj.hack_flags` / `traj.hack_zeroed` (the reward-hack monitor). None here."""

    @abstractmethod
    async def finish(self, submitted: bool) -> Outcome: ...

    @abstractmethod
    async def close(self) -> None: ...


@register_env("swe")
class SWEEnv(AgentEnv):
    """A task's repository in a sandbox; the reward is its tests in a fresh sandbox. Where the sandboxes run
    is its placement's business (verl_swe/agent/placement.py): this machine, or a sandbox node of the cluster."""

    @classmethod
    def from_row(cls, row: Any, environments: Any, **options: Any) -> "SWEEnv":
        from verl_swe.tasks import Task

        return cls(row if isinstance(row, Task) else Task.model_validate(row), environments, **options)

    def __init__(self, task, environments, *, command_timeout_s: float = 120.0, grade_timeout_s: float = 1800.0,
                 grade_unsubmitted: bool = False, instance_template: str | None = None, hack_policy=None):
        from verl_swe.agent.prompts import INSTANCE_TEMPLATE
        from verl_swe.reward.monitor import HackPolicy

        self.hack_policy = hack_policy or HackPolicy()

        self.task = task
        if not hasattr(environments, "open"):  # a bare `Environments`: sandboxes here
            from verl_swe.agent.placement import LocalPlacement

            environments = LocalPlacement(environments)
        self.placement = environments
        self.command_timeout_s = command_timeout_s
        self.grade_timeout_s = grade_timeout_s
        self.grade_unsubmitted = grade_unsubmitted
        self.template = instance_template or INSTANCE_TEMPLATE
        self._box = None
        self._node_id: str | None = None
        self._aci = None

    async def prepare(self) -> None:
        if self._box is None:
            self._box = await self.placement.open(self.task)
            self._node_id = getattr(self._box, "node_id", None)

    async def start(self) -> str:
        from verl_swe.tools.aci import ACI

        await self.prepare()
        self._aci = ACI(self._box, command_timeout_s=self.command_timeout_s)
        return self.template.format(problem_statement=self.task.problem_statement, workdir=self._box.config.workdir,
                                    repo=self.task.repo)

    async def step(self, action: Action) -> Step:
        if action.tool == "submit":
            return Step("Submitted.", done=True)
        return Step(await self._aci.run(action))

    def prompt_line(self) -> str:
        return self._aci.prompt_line() if self._aci else ""

    def placement_info(self) -> dict[str, Any]:
        return {"sandbox_node": self._node_id} if self._node_id else {}

    async def finish(self, submitted: bool) -> Outcome:
        from verl_swe.agent.infra import infra_kind
        from verl_swe.sandbox.shell import SandboxError
        from verl_swe.tools.aci import CommandError

        out = Outcome()
        if self._aci is None:
            return out
        try:
            out.patch = await self._aci.patch()
        except (SandboxError, CommandError) as e:
            out.error = f"reading the patch failed: {e}"
            out.infra = infra_kind(e)
            return out
        finally:
            await self.close()  # the agent's sandbox is done before grading starts another
        if not (submitted or self.grade_unsubmitted):
            return out
        grading = await self.placement.grade(self.task, out.patch, self.grade_timeout_s, node_id=self._node_id)
        result = grading.result
        out.resolved, out.grade, out.infra = result.resolved, result.to_dict(), grading.infra
        out.error = f"grading: {result.error}" if result.error else None
        return out

    def review(self, traj) -> None:
        from verl_swe.reward.monitor import episode_flags

        traj.hack_flags = episode_flags(self.task, traj)
        traj.hack_zeroed = self.hack_policy.zeroes(traj.hack_flags)

    async def close(self) -> None:
        if self._box is not None:
            box, self._box = self._box, None
            await box.close()
