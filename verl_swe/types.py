"""Typed values shared across verl_swe (no torch, ray or verl imports here)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


@dataclass(frozen=True)
class ExecResult:
    """What one command in a sandbox produced.

    `output` is stdout and stderr interleaved, decoded as UTF-8 with replacement; when `truncated`,
    its head and tail are kept and the cut is said in the text.
    """

    exit_code: int
    output: str
    timed_out: bool = False
    truncated: bool = False
    duration_s: float = 0.0


class ExitStatus(str, Enum):
    """Why an episode ended."""

    SUBMITTED = "submitted"
    MAX_TURNS = "max_turns"
    CONTEXT_EXHAUSTED = "context_exhausted"
    FORMAT_ERRORS = "format_errors"
    # The server cut the turn's generation (finish reason length: the turn's max_new_tokens; or aborted) before
    # the model ended it: no action to parse, so not a format error; the episode ends unsubmitted.
    GENERATION_CUT = "generation_cut"
    SANDBOX_ERROR = "sandbox_error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class Action:
    """One parsed agent action: a tool name and its arguments (`bash` takes the command line)."""

    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    text: str = ""  # the command as the model wrote it, for logs and the viewer


@dataclass(frozen=True)
class FormatError:
    """A turn whose action could not be extracted; the message is the observation the agent sees."""

    message: str


@dataclass
class Turn:
    """One assistant turn and the observation it produced."""

    index: int
    assistant: str  # the model's text, decoded from its own tokens
    action: Action | None
    observation: str
    format_error: bool = False  # RFT masks these turns (paper 1.5)
    generated_tokens: int = 0
    observation_tokens: int = 0
    stop_reason: str = ""
    generation_s: float = 0.0
    tool_s: float = 0.0
    # The ids the model sampled for this turn, exactly (its end-of-turn token included when it ended the turn):
    # SFT trains on these rather than on a re-encoding of `assistant` (verl_swe/rft/render.py). None: not recorded.
    token_ids: list[int] | None = None


@dataclass
class Trajectory:
    """One episode, saved as one JSON document: RFT, curation, eval and the viewer read this format."""

    instance_id: str
    episode_id: str
    messages: list[dict[str, Any]] = field(default_factory=list)  # the chat as the template renders it
    turns: list[Turn] = field(default_factory=list)
    exit_status: ExitStatus | None = None
    patch: str = ""
    reward: float = 0.0
    resolved: bool = False
    turn_penalty: float = 0.0
    grade: dict[str, Any] | None = None  # the grader's report
    error: str | None = None  # sandbox, grader or episode errors, as text
    prompt_tokens: int = 0
    response_tokens: int = 0
    generated_tokens: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)  # model, sampling, limits, tool set
    # Set when the episode failed for an infrastructure reason, not the agent's (verl_swe/agent/infra.py: the
    # kind): never trained on, excluded from its group, redone by a resumed run.
    infra_failure: str | None = None
    # What the episode cost: sandbox_cpu_s, sandbox_s, sandboxes, wall_s, prepare_s, tokens, generated_tokens.
    cost: dict[str, float] = field(default_factory=dict)
    # The reward-hack monitor's flags: flag -> evidence (verl_swe/reward/monitor.py names them), and whether
    # `on_hack: zero` set the episode's outcome reward to 0 for them.
    hack_flags: dict[str, list[str]] = field(default_factory=dict)
    hack_zeroed: bool = False

    @property
    def num_turns(self) -> int:
        return len(self.turns)

    @property
    def settled(self) -> bool:
        """Whether the episode's outcome is the agent's: not cancelled, not an infrastructure failure. Readers
        that count outcomes (eval, curriculum, resume) count only these; the others are redone."""
        return self.exit_status not in (None, ExitStatus.CANCELLED) and self.infra_failure is None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["exit_status"] = self.exit_status.value if self.exit_status else None
        d["num_turns"] = self.num_turns
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Trajectory":
        d = dict(d)
        d.pop("num_turns", None)
        turns = []
        for t in d.pop("turns", []):
            action = Action(**t["action"]) if t.get("action") else None
            turns.append(Turn(**{**t, "action": action}))
        status = d.pop("exit_status", None)
        return cls(**d, turns=turns, exit_status=ExitStatus(status) if status else None)
