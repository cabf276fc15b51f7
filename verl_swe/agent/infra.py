"""Infrastructure failures, kept apart from the agent's own: what the model did not cause is never trained on.

An episode that fails for an infrastructure reason is retried (when the reason is transient), and if it still
fails it is marked (`Trajectory.infra_failure`, the kind below), excluded from its group by the sampler
(verl_swe/trainer/infra_filter.py), counted in `swe/infra/*`, and redone by a resumed `rollout`/`eval`.

The line, and why it is drawn there: a policy optimises against whatever the classification rewards, so
only positive evidence of an outside cause counts as infrastructure. A command that exhausts the sandbox's
memory, kills its shell's supervisor or hangs is the agent's (its exit status says so); the environment not
building, a sandbox that did not start, the engine or the sandbox's node going away, the sandbox removed
or killed from outside, are not. Model-side ends (format errors, turn cap, context, timeout) stay the
agent's; a failed model server raises ModelError and abandons the episode (verl_swe/agent/llm.py).
"""

from __future__ import annotations

from verl_swe.sandbox.shell import SandboxDied, SandboxError, SandboxFileError, SandboxStartError

ENV_BUILD = "env_build"  # the task's environment did not build (or its repository could not be had)
ENV_NOT_READY = "env_not_ready"  # env_prepare=ahead and no environment was built for it on that node
PREPARE_TIMEOUT = "prepare_timeout"  # the environment and sandbox were not ready within prepare_timeout_s
SANDBOX_START = "sandbox_start"  # the sandbox did not start, after retries
SANDBOX_LOST = "sandbox_lost"  # killed or removed from outside, or its engine stopped answering
HOST_LOST = "host_lost"  # the node (or host process) that ran the sandbox is gone
GRADING = "grading"  # the grader's environment or sandbox failed before the patch was applied
NO_CAPACITY = "no_capacity"  # no node offers sandbox capacity (the verl_swe_sandbox resource)
INTERNAL = "internal"  # an error in this package before the agent acted

KINDS = (ENV_BUILD, ENV_NOT_READY, PREPARE_TIMEOUT, SANDBOX_START, SANDBOX_LOST, HOST_LOST, GRADING, NO_CAPACITY,
         INTERNAL)
# Worth running the episode again: another attempt may land on a healthy node or engine. A build that failed
# fails again (its failure is remembered per node), and an internal error is a bug to fix, not to retry.
TRANSIENT = frozenset({PREPARE_TIMEOUT, SANDBOX_START, SANDBOX_LOST, HOST_LOST, GRADING, NO_CAPACITY})


class InfraFailure(Exception):
    """The episode cannot go on for an infrastructure reason `kind` (one of KINDS)."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind, self.message = kind, message

    def __reduce__(self):  # crosses Ray (pickled) as itself
        return type(self), (self.kind, self.message)


def infra_kind(error: BaseException) -> str | None:
    """The infrastructure kind of an error that ended an episode, or None when it is the agent's."""
    if isinstance(error, InfraFailure):
        return error.kind
    if isinstance(error, SandboxStartError):
        return SANDBOX_START
    if isinstance(error, SandboxDied):
        if error.cause == "host_lost":
            return HOST_LOST
        return SANDBOX_LOST if error.infra else None
    if isinstance(error, SandboxFileError):
        return None  # the sandbox answered: the agent's file operation failed
    if isinstance(error, SandboxError):
        return None  # a sandbox that is there but misused or dead without evidence: the agent's (see above)
    return None
