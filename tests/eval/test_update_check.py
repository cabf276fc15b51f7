"""The learning diagnostics score exactly the tokens the policy produced: the demonstrations' log-likelihood is
log pi of the rollout's own action tokens (ids and mask rebuilt from the saved trajectory), and the advantages
are P1 Eq. 2 per task with zero-advantage groups dropped, as the trainer has them."""

from __future__ import annotations

import math

import pytest
import torch

from tests.rft.episodes import play, script
from verl_swe.eval.update_check import demonstration_log_prob, demonstrations, with_advantages
from verl_swe.testing.tiny import tiny_qwen2
from verl_swe.testing.tokenizer import qwen_tokenizer


@pytest.mark.asyncio
async def test_demonstration_log_prob_is_log_pi_of_the_rollouts_action_tokens(tmp_path):
    res = await play(script("paper", format_errors_at=(1,), turns=4), run_dir=tmp_path, resolved=True)
    await play(script("paper", turns=3), episode_id="repo__task-1.1", instance_id="repo__other-1",
               run_dir=tmp_path, resolved=False)  # not a demonstration: unresolved
    model = tiny_qwen2(len(qwen_tokenizer()), hidden_size=32)
    demos = demonstrations(tmp_path, qwen_tokenizer())
    assert list(demos) == ["repo__task-1"]

    ids = res.prompt_ids + res.response_ids
    with torch.no_grad():
        logp = model(torch.tensor([ids])).logits[0, :-1].log_softmax(-1)
    actions = [len(res.prompt_ids) + i for i, m in enumerate(res.response_mask) if m]
    expected = sum(float(logp[p - 1, ids[p]]) for p in actions)  # every assistant token, format errors too

    scored = demonstration_log_prob(model, demos)
    assert scored["tasks"] == 1
    assert scored["log_prob"] == pytest.approx(expected, abs=1e-3)
    assert scored["prob"] == pytest.approx(math.exp(expected), rel=1e-3)


@pytest.mark.asyncio
async def test_advantages_are_eq2_per_task_and_uniform_groups_are_dropped(tmp_path):
    trajs = []
    for task, resolved in (("repo__a-1", [True, False, False, False]), ("repo__b-1", [False] * 4)):
        for i, ok in enumerate(resolved):
            res = await play(script("paper", format_errors_at=(), turns=3), instance_id=task,
                             episode_id=f"{task}.{i}", resolved=ok)
            trajs.append(res.trajectory)
    kept = with_advantages(trajs, qwen_tokenizer())
    assert [task for task, *_ in kept] == ["repo__a-1"] * 4  # b's rewards are all equal: no signal, dropped
    rewards = torch.tensor([t.reward for t in trajs[:4]])
    expected = (rewards - rewards.mean()) / (rewards.std() + 1e-6)  # P1 Eq. 2, the sample std
    assert [a for *_, a in kept] == pytest.approx(expected.tolist(), abs=1e-5)
    assert kept[0][3] > 0 > kept[1][3]


def _decomposition_bench():
    import importlib.util
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[2] / "bench"
    sys.path.insert(0, str(bench))  # the bench imports its sibling learning.py, as when run from bench/
    try:
        spec = importlib.util.spec_from_file_location("update_decomposition", bench / "update_decomposition.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(bench))
    return module


@pytest.mark.asyncio
async def test_the_decompositions_parts_sum_to_the_full_gradient(tmp_path):
    """bench/update_decomposition.py's premise: the A > 0 and A < 0 parts of Eq. 8 keep the whole batch's token
    normalizer, so their gradients add up to the full update's."""
    from types import SimpleNamespace

    bench = _decomposition_bench()
    trajs = []
    for i, ok in enumerate([True, False, False]):
        res = await play(script("paper", format_errors_at=(), turns=3 + i), instance_id="repo__a-1",
                         episode_id=f"repo__a-1.{i}", resolved=ok)
        trajs.append(res.trajectory)
    batch = [(ids, mask, a) for _, ids, mask, a in with_advantages(trajs, qwen_tokenizer())]
    assert sorted(a > 0 for *_, a in batch) == [False, False, True]
    model = tiny_qwen2(len(qwen_tokenizer()), hidden_size=32).train()
    actor = SimpleNamespace(clip_ratio_low=0.2, clip_ratio_high=0.28)

    def grads(part):
        model.zero_grad()
        bench.batch_loss(model, batch, bench.PARTS[part], actor).backward()
        return [p.grad.clone() for p in model.parameters()]

    full, positive, negative = grads("all"), grads("positive"), grads("negative")
    for f, p, n in zip(full, positive, negative):
        torch.testing.assert_close(f, p + n, rtol=1e-4, atol=1e-7)
    assert any(float(p.norm()) > 0 for p in positive) and any(float(n.norm()) > 0 for n in negative)
