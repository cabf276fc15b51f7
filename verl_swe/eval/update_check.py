"""Did an RL update move the policy the way its advantages say?

For iteration `step` of a run, the episodes it trained on (those sampled by the weights of `step - 1`:
`metadata.policy_version`) are scored under the two saved HF checkpoints, before and after its update.
Their advantages are P1 Eq. 2 on their rewards, per task. To first order, an update on the policy loss
raises sum_i A_i * delta log pi(tau_i), the log-probability change summed over each episode's action tokens:
a sign flipped or a reward sent to the wrong row makes it negative. Rewards mix with the turn penalty
exactly as the trainer saw them (the trajectory's `reward`).

The token ids are rebuilt with the agent loop's own ChatTokens (verl_swe/rft/render.py), as RFT builds them.

`demonstration_log_prob` is the low-variance companion of held-out pass@1 on the mini tasks: the log-probability
of the oracle's action tokens given its observations. A mini task's sampled successes nearly all repeat the
oracle's turns token for token, so exp() of it is the chance of sampling that path, most of the pass rate and a
lower bound on it: a policy that learns raises it, and it moves measurably after a single update where 80
evaluation episodes cannot.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import torch

from verl_swe.agent.tokens import ChatTokens
from verl_swe.algo.advantages import group_advantages, zero_advantage_groups
from verl_swe.rft.read import read_run_dir
from verl_swe.rft.render import sft_example, token_ids
from verl_swe.types import Trajectory


def checkpoint(rl_dir: Path, step: int) -> Path:
    return rl_dir / f"global_step_{step}" / "actor" / "huggingface"


def _trained_on(rl_dir: Path, step: int) -> list[Trajectory]:
    return [traj for _, traj in read_run_dir(rl_dir)
            if isinstance(traj, Trajectory) and traj.metadata.get("policy_version") == step - 1
            and not traj.infra_failure]  # the sampler leaves infrastructure failures out of their group


def action_log_probs(model, ids: list[int], mask: list[int]) -> torch.Tensor:
    """log pi of each action token: the LM head only where the mask is set (a 152k-column head at every
    position is most of the cost on a tiny model)."""
    x = torch.tensor([ids])
    hidden = model.model(x).last_hidden_state[0, :-1]
    keep = torch.tensor(mask[1:], dtype=torch.bool)
    logits = model.lm_head(hidden[keep]).float()
    return logits.log_softmax(-1).gather(1, x[0, 1:][keep][:, None])[:, 0]


def episode_tokens(trajs: list[Trajectory], tokenizer) -> list[tuple[list[int], list[int]]]:
    """(token ids, action mask) of each trajectory, every assistant turn an action (the RL loss trains them
    all, format errors included)."""
    chats: dict[str, ChatTokens] = {}
    out = []
    for t in trajs:
        ex = sft_example(t)
        key = json.dumps([ex.tools, ex.observation_role])
        if key not in chats:
            chats[key] = ChatTokens(tokenizer, ex.tools, ex.observation_role)
        out.append(token_ids(chats[key], ex.messages, [1] * len(ex.assistant_loss_mask)))
    return out


def load_policy(path: Path):
    """An HF checkpoint in fp32 (the tiny recipe's compute dtype), for scoring."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()


def demonstrations(demo_dir: Path, tokenizer) -> dict[str, tuple[list[int], list[int]]]:
    """{instance_id: (token ids, action mask)} of the resolved trajectories in `demo_dir` (the oracle's run)."""
    demos = [t for _, t in read_run_dir(demo_dir) if isinstance(t, Trajectory) and t.resolved]
    if not demos:
        raise ValueError(f"{demo_dir}: no resolved trajectory to score")
    return {t.instance_id: tokens for t, tokens in zip(demos, episode_tokens(demos, tokenizer))}


def demonstration_log_prob(model, demos: dict[str, tuple[list[int], list[int]]]) -> dict:
    """{'tasks', 'log_prob': mean over tasks of log pi(the demonstration's actions), 'prob': mean of its exp
    (the chance of sampling that path), 'per_task'}."""
    with torch.no_grad():
        per_task = {task: float(action_log_probs(model, ids, mask).sum()) for task, (ids, mask) in demos.items()}
    return {"tasks": len(per_task), "log_prob": statistics.mean(per_task.values()),
            "prob": statistics.mean(math.exp(v) for v in per_task.values()), "per_task": per_task}


def trained_episodes(rl_dir: Path, step: int, tokenizer) -> list[tuple[str, list[int], list[int], float]]:
    """The episodes iteration `step` trained on, as `with_advantages` gives them."""
    return with_advantages(_trained_on(rl_dir, step), tokenizer)


def with_advantages(trajs: list[Trajectory], tokenizer) -> list[tuple[str, list[int], list[int], float]]:
    """(instance id, token ids, action mask, advantage) of each trajectory: advantages by P1 Eq. 2 over each
    task's group, as the trainer computes them; groups the sampler would drop (zero advantage) left out."""
    rewards = torch.tensor([t.reward for t in trajs])
    ids_of_group = [t.instance_id for t in trajs]
    advantages = group_advantages(rewards, ids_of_group)
    dropped = zero_advantage_groups(rewards, ids_of_group)
    kept = [(t, a) for t, a, drop in zip(trajs, advantages.tolist(), dropped.tolist()) if not drop]
    tokens = episode_tokens([t for t, _ in kept], tokenizer)
    return [(t.instance_id, ids, mask, a) for (t, a), (ids, mask) in zip(kept, tokens)]


def update_direction(rl_dir: Path, step: int, tokenizer, before: Path | None = None) -> dict:
    """{'episodes', 'objective_change': sum_i A_i * delta log pi(tau_i) / episodes, 'dlogp_positive' /
    'dlogp_negative': mean delta log pi per action token of episodes with A > 0 / A < 0}. `before`: the
    weights iteration `step` started from, when not a checkpoint of the run (the RFT model, for step 1)."""
    trained = trained_episodes(rl_dir, step, tokenizer)
    if not trained:
        raise ValueError(f"{rl_dir}: iteration {step} trained on no group with two rewards "
                         f"(trajectories with metadata.policy_version {step - 1})")
    models = [load_policy(path) for path in (before or checkpoint(rl_dir, step - 1), checkpoint(rl_dir, step))]
    change, per_token = 0.0, {1: [], -1: []}
    with torch.no_grad():
        for _, ids, mask, advantage in trained:
            old, new = (action_log_probs(m, ids, mask) for m in models)
            change += advantage * float((new - old).sum())
            per_token[1 if advantage > 0 else -1].append(float((new - old).mean()))
    episodes = len(trained)
    return {"step": step, "episodes": episodes, "objective_change": change / episodes,
            "dlogp_positive": statistics.mean(per_token[1]) if per_token[1] else None,
            "dlogp_negative": statistics.mean(per_token[-1]) if per_token[-1] else None}
