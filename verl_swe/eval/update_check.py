"""Did an RL update move the policy the way its advantages say?

For iteration `step` of a run, the episodes it trained on (those sampled by the weights of `step - 1`:
`metadata.policy_version`) are scored under the two saved HF checkpoints, before and after its update.
Their advantages are P1 Eq. 2 on their rewards, per task. To first order, an update on the policy loss
raises sum_i A_i * delta log pi(tau_i), the log-probability change summed over each episode's action tokens:
a sign flipped or a reward sent to the wrong row makes it negative. Rewards mix with the turn penalty
exactly as the trainer saw them (the trajectory's `reward`).

The token ids are rebuilt with the agent loop's own ChatTokens (verl_swe/rft/render.py), as RFT builds them.
"""

from __future__ import annotations

import json
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


def _action_log_probs(model, ids: list[int], mask: list[int]) -> torch.Tensor:
    """log pi of each action token: the LM head only where the mask is set (a 152k-column head at every
    position is most of the cost on a tiny model)."""
    x = torch.tensor([ids])
    hidden = model.model(x).last_hidden_state[0, :-1]
    keep = torch.tensor(mask[1:], dtype=torch.bool)
    logits = model.lm_head(hidden[keep]).float()
    return logits.log_softmax(-1).gather(1, x[0, 1:][keep][:, None])[:, 0]


def update_direction(rl_dir: Path, step: int, tokenizer, before: Path | None = None) -> dict:
    """{'episodes', 'objective_change': sum_i A_i * delta log pi(tau_i) / episodes, 'dlogp_positive' /
    'dlogp_negative': mean delta log pi per action token of episodes with A > 0 / A < 0}. `before`: the
    weights iteration `step` started from, when not a checkpoint of the run (the RFT model, for step 1)."""
    from transformers import AutoModelForCausalLM

    trajs = _trained_on(rl_dir, step)
    models = [AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
              for path in (before or checkpoint(rl_dir, step - 1), checkpoint(rl_dir, step))]
    chats: dict[str, ChatTokens] = {}
    change, per_token = 0.0, {1: [], -1: []}
    episodes = 0
    rewards = torch.tensor([t.reward for t in trajs])
    ids_of_group = [t.instance_id for t in trajs]
    advantages = group_advantages(rewards, ids_of_group)  # P1 Eq. 2, as the trainer computes it
    dropped = zero_advantage_groups(rewards, ids_of_group)  # the sampler dropped these groups
    with torch.no_grad():
        for t, advantage, drop in zip(trajs, advantages.tolist(), dropped.tolist()):
            if drop:
                continue
            ex = sft_example(t)
            key = json.dumps([ex.tools, ex.observation_role])
            if key not in chats:
                chats[key] = ChatTokens(tokenizer, ex.tools, ex.observation_role)
            ids, mask = token_ids(chats[key], ex.messages, [1] * len(ex.assistant_loss_mask))
            before, after = (_action_log_probs(m, ids, mask) for m in models)
            delta = after - before
            change += advantage * float(delta.sum())
            per_token[1 if advantage > 0 else -1].append(float(delta.mean()))
            episodes += 1
    if not episodes:
        raise ValueError(f"{rl_dir}: iteration {step} trained on no group with two rewards "
                         f"(trajectories with metadata.policy_version {step - 1})")
    return {"step": step, "episodes": episodes, "objective_change": change / episodes,
            "dlogp_positive": statistics.mean(per_token[1]) if per_token[1] else None,
            "dlogp_negative": statistics.mean(per_token[-1]) if per_token[-1] else None}
