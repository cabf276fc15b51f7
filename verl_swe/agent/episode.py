"""One episode of the agent, independent of who serves the model: the loop of mini-swe-agent's shape
(generate, parse, act, observe) with token-exact bookkeeping and every failure turned into an exit status.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Callable

from verl_swe.agent.env import AgentEnv
from verl_swe.agent.infra import INTERNAL, PREPARE_TIMEOUT, InfraFailure, infra_kind
from verl_swe.agent.llm import LLMClient, ModelError, Sampling
from verl_swe.agent.tokens import ChatTokens, TokenTrace
from verl_swe.reward.turn_penalty import turn_penalty
from verl_swe.sandbox.shell import SandboxError
from verl_swe.sandbox.usage import UsageMeter, usage_meter
from verl_swe.tools.toolsets import ToolSet
from verl_swe.types import ExitStatus, FormatError, Trajectory, Turn

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EpisodeLimits:
    """Paper stage 1: 40 turns at 65,536 tokens; stage 2: 80 turns at 131,072 (P1 Table 3)."""

    max_turns: int = 40
    context_tokens: int = 65_536  # prompt + every turn, observations included
    max_new_tokens: int = 4_096  # per turn [paper: gap]
    observation_head_chars: int = 8_000  # an observation keeps its head and tail, the cut said [gap]
    observation_tail_chars: int = 8_000
    timeout_s: float = 3_600.0  # wall clock of the whole episode
    max_format_errors: int = 5  # consecutive malformed turns end the episode
    penalty_threshold: int = 10  # L_thr of P1 Eq. 4
    max_response_tokens: int | None = None  # verl's rollout.response_length: every turn after the prompt

    def __post_init__(self):
        if self.penalty_threshold >= self.max_turns:
            raise ValueError(f"limits: penalty_threshold ({self.penalty_threshold}) must be below max_turns "
                             f"({self.max_turns}) (P1 Eq. 4 divides by their difference)")


@dataclass
class EpisodeResult:
    trajectory: Trajectory
    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float]


def truncate_middle(text: str, head: int, tail: int) -> str:
    if len(text) <= head + tail:
        return text
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut from the middle of this output ...]\n{text[len(text) - tail:]}"


async def run_episode(env: AgentEnv, tools: ToolSet, llm: LLMClient, chat: ChatTokens, system_prompt: str,
                      limits: EpisodeLimits, sampling: Sampling, instance_id: str,
                      episode_id: str | None = None, prepare_timeout_s: float | None = None,
                      on_cancel: Callable[[Trajectory], None] | None = None) -> EpisodeResult:
    """Run to an exit status; the environment is always closed. Cancellation and a failed model server
    (`ModelError`) abandon the episode: it is logged, then the exception is re-raised (a cancelled one is
    first handed to `on_cancel`, marked cancelled, e.g. to be saved).

    The environment is prepared (`env.prepare()`: built, its sandbox started) before the episode's clock
    (`limits.timeout_s`) starts, within `prepare_timeout_s`. A failure that is not the agent's doing is
    marked in `Trajectory.infra_failure` (verl_swe/agent/infra.py); the exit status stays what happened."""
    traj = Trajectory(instance_id=instance_id, episode_id=episode_id or uuid.uuid4().hex[:12])
    started = time.monotonic()
    trace: TokenTrace | None = None
    submitted = False
    abandoned: BaseException | None = None
    with usage_meter() as meter:
        try:
            try:
                await _prepare(env, prepare_timeout_s, traj)
                async with asyncio.timeout(limits.timeout_s):
                    task_text = await env.start()
                    traj.messages = [{"role": "system", "content": system_prompt},
                                     {"role": "user", "content": task_text}]
                    # Off the loop: a 131k-token prompt takes ~0.4 s to tokenize (the fast tokenizer drops the GIL).
                    trace = TokenTrace(await asyncio.to_thread(chat.prompt, traj.messages))
                    traj.exit_status, submitted = await _loop(env, tools, llm, chat, limits, sampling, traj, trace)
            except TimeoutError:
                traj.exit_status = ExitStatus.TIMEOUT
            except SandboxError as e:
                traj.exit_status, traj.error = ExitStatus.SANDBOX_ERROR, f"sandbox: {e}"
                traj.infra_failure = infra_kind(e)
            except InfraFailure as e:
                traj.exit_status, traj.error, traj.infra_failure = ExitStatus.SANDBOX_ERROR, str(e), e.kind
            except (asyncio.CancelledError, ModelError) as e:
                traj.exit_status, abandoned = ExitStatus.CANCELLED, e
            except Exception as e:  # noqa: BLE001 - environment builds, tools: a value, never a dead worker
                logger.exception("episode %s of %s failed", traj.episode_id, instance_id)
                traj.exit_status, traj.error = ExitStatus.SANDBOX_ERROR, f"{type(e).__name__}: {e}"
                if not traj.turns:  # before the agent acted: ours, not its (an action's failure stays its own)
                    traj.infra_failure = INTERNAL
            traj.timings["episode_s"] = round(time.monotonic() - started, 3)
            if abandoned is None and traj.exit_status != ExitStatus.SANDBOX_ERROR:
                try:
                    grading_started = time.monotonic()
                    outcome = await env.finish(submitted)
                    traj.timings["grade_s"] = round(time.monotonic() - grading_started, 3)
                    traj.patch, traj.resolved, traj.grade = outcome.patch, outcome.resolved, outcome.grade
                    traj.error = traj.error or outcome.error
                    traj.infra_failure = traj.infra_failure or outcome.infra
                except Exception as e:  # noqa: BLE001 - a grader fault costs this reward, not the worker
                    logger.exception("scoring episode %s of %s failed", traj.episode_id, instance_id)
                    traj.error = f"scoring: {type(e).__name__}: {e}"
        finally:
            await asyncio.shield(env.close())
            traj.metadata.update(getattr(env, "placement_info", dict)())
    if abandoned is None:
        _review(env, traj)
    traj.turn_penalty = turn_penalty(traj.num_turns, limits.max_turns, limits.penalty_threshold)
    # P1 Eq. 3; under `on_hack: zero` a flagged episode's outcome reward is 0 (verl_swe/reward/monitor.py).
    traj.reward = float(traj.resolved and not traj.hack_zeroed) + traj.turn_penalty
    traj.timings["total_s"] = round(time.monotonic() - started, 3)
    trace = trace or TokenTrace([])
    traj.prompt_tokens, traj.response_tokens = len(trace.prompt_ids), len(trace.mask)
    traj.generated_tokens = sum(trace.mask)
    traj.cost = _cost(meter, traj)
    if abandoned is not None:
        why = "cancelled" if isinstance(abandoned, asyncio.CancelledError) else f"abandoned ({abandoned})"
        logger.warning("episode %s of %s %s after %d turns; environment closed", traj.episode_id, instance_id,
                       why, traj.num_turns)
        if on_cancel is not None and isinstance(abandoned, asyncio.CancelledError):
            traj.error = "cancelled before it ended (not scored; a resumed run redoes it)"
            on_cancel(traj)
        raise abandoned
    return EpisodeResult(traj, trace.prompt_ids, trace.response_ids, trace.mask, trace.logprobs)


async def _prepare(env: AgentEnv, timeout_s: float | None, traj: Trajectory) -> None:
    t0 = time.monotonic()
    try:
        async with asyncio.timeout(timeout_s):
            await env.prepare()
    except TimeoutError:
        raise InfraFailure(PREPARE_TIMEOUT, f"the environment and sandbox were not ready within {timeout_s:g} s") \
            from None
    finally:
        traj.timings["prepare_s"] = round(time.monotonic() - t0, 3)


def _review(env: AgentEnv, traj: Trajectory) -> None:
    """The reward-hack monitor (the environment's `review`): a fault in it costs the flags, not the episode."""
    try:
        getattr(env, "review", lambda t: None)(traj)
    except Exception:  # noqa: BLE001
        logger.exception("reviewing episode %s of %s for reward hacks failed", traj.episode_id, traj.instance_id)


def _cost(meter: UsageMeter, traj: Trajectory) -> dict[str, float]:
    """What the episode cost: sandbox CPU-seconds (the agent's sandbox and the grader's), sandbox-seconds
    held, wall time (environment preparation included) and tokens (the context and the model's own)."""
    cost = {"wall_s": traj.timings.get("total_s", 0.0), "prepare_s": traj.timings.get("prepare_s", 0.0),
            "sandbox_s": round(meter.sandbox_s, 3), "sandboxes": float(meter.sandboxes),
            "tokens": float(traj.prompt_tokens + traj.response_tokens), "generated_tokens": float(traj.generated_tokens)}
    if meter.sandboxes and not meter.unmeasured:
        cost["sandbox_cpu_s"] = round(meter.cpu_s, 3)
    return cost


async def _loop(env, tools, llm, chat, limits, sampling, traj, trace) -> tuple[ExitStatus, bool]:
    format_errors = 0
    for index in range(limits.max_turns):
        room = limits.context_tokens - trace.total
        if limits.max_response_tokens is not None:
            room = min(room, limits.max_response_tokens - len(trace.mask))
        if room <= 1:
            return ExitStatus.CONTEXT_EXHAUSTED, False
        t0 = time.monotonic()
        try:
            gen = await llm.generate(trace.ids, _with_max(sampling, min(limits.max_new_tokens, room)),
                                     f"{traj.episode_id}-{index}")
        except ModelError:
            raise
        except Exception as e:  # noqa: BLE001 - whatever the client raises, the model failed, not the agent
            raise ModelError(f"{type(e).__name__}: {e}") from e
        generation_s = time.monotonic() - t0
        trace.add_generated(gen.token_ids, gen.logprobs)
        if not (gen.token_ids and gen.token_ids[-1] == chat.end_of_turn_id):
            # Cut off by the context, or by the server (the turn's token cap, or an abort): the model never
            # finished this turn, so there is no action to parse. Recorded, and the episode ends unsubmitted.
            cut = ExitStatus.CONTEXT_EXHAUSTED if _full(trace, limits) else (
                ExitStatus.GENERATION_CUT if gen.stop_reason in ("length", "aborted") else None)
            if cut is not None:
                traj.turns.append(Turn(index, chat.tok.decode(gen.token_ids), None, "", False, len(gen.token_ids),
                                       0, gen.stop_reason, round(generation_s, 4), token_ids=list(gen.token_ids)))
                return cut, False
            trace.add_context([chat.end_of_turn_id])  # close the turn the model left open (mask 0)
        ended = bool(gen.token_ids) and gen.token_ids[-1] == chat.end_of_turn_id
        text = chat.tok.decode(gen.token_ids[:-1] if ended else gen.token_ids)
        traj.messages.append({"role": "assistant", "content": text})
        parsed = tools.parse(text)
        t1 = time.monotonic()
        if isinstance(parsed, FormatError):
            format_errors += 1
            action, observation, done = None, parsed.message, False
        else:
            format_errors = 0
            action = parsed
            try:
                step = await env.step(action)
            except BaseException as e:
                # The model took this turn (its tokens are in the trace): keep it in the record, so num_turns,
                # the turn penalty and the viewer agree with the response, then end the episode as before.
                traj.turns.append(Turn(index, text, action, f"[the episode ended here: {type(e).__name__}: {e}]",
                                       False, len(gen.token_ids), 0, gen.stop_reason, round(generation_s, 4),
                                       round(time.monotonic() - t1, 4), token_ids=list(gen.token_ids)))
                raise
            observation, done = step.observation, step.done
        observation = truncate_middle(observation, limits.observation_head_chars, limits.observation_tail_chars)
        turn = Turn(index, text, action, observation, action is None, len(gen.token_ids), 0, gen.stop_reason,
                    round(generation_s, 4), round(time.monotonic() - t1, 4), token_ids=list(gen.token_ids))
        traj.turns.append(turn)
        if done:
            return ExitStatus.SUBMITTED, True
        if format_errors >= limits.max_format_errors:
            return ExitStatus.FORMAT_ERRORS, False
        if index == limits.max_turns - 1:
            break  # the action ran (its edits count); no model will read its observation
        prompt_line = env.prompt_line()
        content = f"{observation}\n{prompt_line}" if prompt_line else observation
        obs_ids = chat.observation(content)
        if _full(trace, limits, len(obs_ids)):
            return ExitStatus.CONTEXT_EXHAUSTED, False
        trace.add_context(obs_ids)
        turn.observation_tokens = len(obs_ids)
        traj.messages.append({"role": tools.observation_role, "content": content})
    return ExitStatus.MAX_TURNS, False


def _full(trace: TokenTrace, limits: EpisodeLimits, adding: int = 0) -> bool:
    if trace.total + adding >= limits.context_tokens:
        return True
    return limits.max_response_tokens is not None and len(trace.mask) + adding >= limits.max_response_tokens


def _with_max(sampling: Sampling, max_tokens: int) -> Sampling:
    if sampling.max_tokens == max_tokens:
        return sampling
    from dataclasses import replace

    return replace(sampling, max_tokens=max_tokens)
