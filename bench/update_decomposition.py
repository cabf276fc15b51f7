"""Which part of a DAPO update helps the tiny policy, and which part hurts it? The learning run's diagnosis.

    python bench/update_decomposition.py --arm runs/learning/treatment [--arm ...]

For each learning-run arm (bench/learning.py) with an RFT model and its baseline evaluation: the evaluation's
episodes are the RFT model's own samples (10 tasks x 8 at temperature 1, exactly on-policy). Grouped by task,
with P1 Eq. 2 advantages on their rewards (groups the sampler would drop left out: verl_swe/eval/update_check.py),
they are trained on with the recipe's AdamW settings and the product's loss (P1 Eq. 8, verl_swe/algo/loss.py):

- `one_step`: one optimizer step on the whole batch (on-policy: ratio 1);
- `per_group`: one step per group in turn, as the trainer's ppo_mini_batch_size 1 does (after the first step the
  samples are slightly off-policy).

Each three times: every episode, only those with A > 0, only those with A < 0. And `lr_scan`: one full step on
each RL-sized batch (train_batch_size problems' groups) at several learning rates. A part keeps the whole batch's (or
group's) token normalizer, so the parts' gradients sum to the full one. Each result is scored by the
demonstrations' log-likelihood (update_check.demonstration_log_prob): the chance of sampling the oracle's path,
the one every resolved mini-task episode follows. The parts' gradient norms on the whole batch are recorded too.
Writes bench/update-decomposition-results.json: one entry per arm, an arm decomposed again replaces its own.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import torch

from learning import machine
from verl_swe.algo.loss import dapo_token_loss
from verl_swe.eval.update_check import (action_log_probs, demonstration_log_prob, demonstrations, load_policy,
                                        with_advantages)
from verl_swe.pipeline.tiny_cpu import Options, Pipeline
from verl_swe.rft.read import read_run_dir
from verl_swe.testing.tokenizer import qwen_tokenizer
from verl_swe.types import Trajectory

LR_SCAN = (3e-5, 1e-4, 2e-4, 5e-4)
PARTS = {"all": lambda a: True, "positive": lambda a: a > 0, "negative": lambda a: a < 0}


def batch_loss(model, batch, keep, actor) -> torch.Tensor | None:
    """-Eq. 8 over the episodes of `batch` that `keep` selects, normalized by all of the batch's action tokens."""
    tokens = sum(sum(mask[1:]) for _, mask, _ in batch)
    losses = []
    for ids, mask, advantage in batch:
        if keep(advantage):
            log_prob = action_log_probs(model, ids, mask)
            loss, _ = dapo_token_loss(log_prob.detach(), log_prob, torch.full_like(log_prob, advantage),
                                      torch.ones_like(log_prob), actor.clip_ratio_low, actor.clip_ratio_high,
                                      batch_num_tokens=tokens)
            losses.append(loss)
    return torch.stack(losses).sum() if losses else None


def grad_norm(model, batch, keep, actor) -> float:
    model.zero_grad()
    batch_loss(model, batch, keep, actor).backward()
    norm = torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters() if p.grad is not None))
    model.zero_grad()
    return float(norm)


def train(rft, batches, keep, actor, lr: float | None = None):
    """One AdamW step per batch, with the recipe's optimizer settings (lr: unless given) and gradient clip."""
    model = copy.deepcopy(rft).train()
    optim = actor.optim
    opt = torch.optim.AdamW(model.parameters(), lr=lr or optim.lr, betas=tuple(optim.betas),
                            weight_decay=optim.weight_decay, **dict(optim.override_optimizer_config or {}))
    for batch in batches:
        opt.zero_grad()
        loss = batch_loss(model, batch, keep, actor)
        if loss is not None:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), optim.clip_grad)
            opt.step()
    return model.eval()


def decompose(arm: Path, tokenizer) -> dict:
    pipeline = Pipeline(Options(out=arm))
    actor = pipeline.rl_config.actor_rollout_ref.actor
    rft = load_policy(pipeline.rft_model())
    demos = demonstrations(arm / "oracle", tokenizer)
    samples = [t for _, t in read_run_dir(arm / "eval" / "rft") if isinstance(t, Trajectory) and not t.infra_failure]
    groups: dict[str, list] = {}
    for task, ids, mask, advantage in with_advantages(samples, tokenizer):
        groups.setdefault(task, []).append((ids, mask, advantage))
    whole = [episode for group in groups.values() for episode in group]
    baseline = demonstration_log_prob(rft, demos)
    optim = actor.optim
    options = json.loads((arm / "options.json").read_text())
    result = {"arm": str(arm), "rft_model": str(pipeline.rft_model()), "rft_epochs": options["rft_epochs"],
              "start": "oracle+hasty" if options.get("hasty_demos") else "oracle",
              "samples": len(samples), "groups_kept": len(groups), "episodes_kept": len(whole),
              "resolved": sum(t.resolved for t in samples),
              "optimizer": {"lr": optim.lr, "betas": list(optim.betas), "weight_decay": optim.weight_decay,
                            "clip_grad": optim.clip_grad, **dict(optim.override_optimizer_config or {})},
              "grad_norm": {part: grad_norm(rft, whole, PARTS[part], actor) for part in PARTS},
              "rft": {"log_prob": baseline["log_prob"], "prob": baseline["prob"]}}
    for mode, batches in (("one_step", [whole]), ("per_group", list(groups.values()))):
        result[mode] = {}
        for part, keep in PARTS.items():
            scored = demonstration_log_prob(train(rft, batches, keep, actor), demos)
            result[mode][part] = {"log_prob": scored["log_prob"], "prob": scored["prob"],
                                  "prob_change": scored["prob"] - baseline["prob"]}
            print(f"{arm.name} {result['start']} rft_epochs {result['rft_epochs']} {mode:9s} {part:8s} "
                  f"demonstrations' P {baseline['prob']:.4f} -> {scored['prob']:.4f}", flush=True)
    # one step from the start policy on each RL-sized batch (train_batch_size problems), at several lrs: is the
    # change linear in lr (first order: the gradient's direction helps) or does it overshoot?
    size = pipeline.rl_config.data.train_batch_size
    names = sorted(groups)
    rl_batches = [[e for task in names[i:i + size] for e in groups[task]] for i in range(0, len(names), size)]
    result["lr_scan"] = {"batch_problems": size, "prob_change": {}}
    for lr in LR_SCAN:
        changes = [demonstration_log_prob(train(rft, [batch], PARTS["all"], actor, lr), demos)["prob"]
                   - baseline["prob"] for batch in rl_batches]
        result["lr_scan"]["prob_change"][str(lr)] = changes
        print(f"{arm.name} lr {lr:g}: demonstrations' P change per RL batch {[round(c, 4) for c in changes]}",
              flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--arm", type=Path, action="append", required=True, help="a learning-run arm's directory")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "update-decomposition-results.json")
    args = parser.parse_args()
    tokenizer = qwen_tokenizer()
    # an arm decomposed again replaces its entry; the other arms' entries stay
    recorded = json.loads(args.out.read_text())["arms"] if args.out.exists() else []
    for arm in args.arm:
        result = {"machine": machine(), **decompose(arm.resolve(), tokenizer)}
        recorded = [r for r in recorded if r["arm"] != result["arm"]] + [result]
    args.out.write_text(json.dumps({"arms": recorded}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
