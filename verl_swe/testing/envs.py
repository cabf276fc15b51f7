"""A trivial environment for tests and benchmarks: observations from a function, no sandbox."""

from __future__ import annotations

from typing import Callable

from verl_swe.agent.env import AgentEnv, Outcome, Step
from verl_swe.types import Action


class ScriptedEnv(AgentEnv):
    def __init__(self, observe: Callable[[int, Action], str] = lambda i, a: f"ran {a.text}", *,
                 task_text: str = "Fix the bug.", resolved: bool = True, patch: str = "diff --git a/x b/x\n"):
        self.observe = observe
        self.task_text = task_text
        self.resolved = resolved
        self.patch = patch
        self.steps = 0
        self.closed = 0
        self.finished_with: bool | None = None

    async def start(self) -> str:
        return self.task_text

    async def step(self, action: Action) -> Step:
        self.steps += 1
        if action.tool == "submit":
            return Step("Submitted.", done=True)
        return Step(self.observe(self.steps, action))

    def prompt_line(self) -> str:
        return "(Current directory: /testbed, current file: n/a) bash-$"

    async def finish(self, submitted: bool) -> Outcome:
        self.finished_with = submitted
        return Outcome(resolved=self.resolved and submitted, patch=self.patch)

    async def close(self) -> None:
        self.closed += 1
