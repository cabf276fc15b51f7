"""The algorithm's pure functions on hand-computed tensors (expected values derived in comments)."""

import math

import pytest
import torch

from verl_swe.algo.advantages import broadcast_to_tokens, group_advantages, zero_advantage_groups
from verl_swe.algo.loss import dapo_token_loss


def test_group_advantages_eq2():
    # Group a: rewards 1,0,0,1 -> mean 0.5, sample std sqrt(4 * 0.25 / 3) = 0.57735 -> +-0.5/0.57735 = +-0.86603.
    # Group b: 1,1 -> std 0 -> 0 / (0 + eps) = 0. Group c: a single rollout -> 0.
    adv = group_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0]), ["a", "a", "a", "a", "b", "b", "c"])
    assert adv.tolist() == pytest.approx([0.86603, -0.86603, -0.86603, 0.86603, 0.0, 0.0, 0.0], abs=1e-4)


def test_group_advantages_with_the_turn_penalty():
    # Rewards after Eq. 3: 1 - 0.5 = 0.5 (solved in 25 of 40 turns), 0 (failed fast), -1 (failed at 40 turns).
    # mean -1/6; deviations 2/3, 1/6, -5/6; sample std sqrt((4/9 + 1/36 + 25/36) / 2) = sqrt(7/12) = 0.76376.
    adv = group_advantages(torch.tensor([0.5, 0.0, -1.0]), [0, 0, 0])
    s = math.sqrt(7 / 12)
    assert adv.tolist() == pytest.approx([(2 / 3) / s, (1 / 6) / s, (-5 / 6) / s], abs=1e-5)


def test_broadcast_and_zero_groups():
    mask = torch.tensor([[1, 1, 0, 1], [1, 0, 0, 0]])
    assert broadcast_to_tokens(torch.tensor([2.0, -1.0]), mask).tolist() == [[2, 2, 0, 2], [-1, 0, 0, 0]]
    # all-equal groups are dropped (a: all 0, c: all -0.25), mixed groups kept (b)
    drop = zero_advantage_groups(torch.tensor([0.0, 0.0, 1.0, 0.0, -0.25, -0.25]), ["a", "a", "b", "b", "c", "c"])
    assert drop.tolist() == [True, True, False, False, True, True]


def test_loss_eq8_by_hand():
    # One trajectory, 3 action tokens and 1 observation token (mask 0). old log-probs 0, so rho = exp(logp).
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.1, 7.0]]))
    mask = torch.tensor([[1, 1, 1, 0]])
    # A = +1, clip to [0.8, 1.3]: min(rho, clip(rho)) = [1.3, 0.5, 1.1] -> J = 2.9 / 3, loss = -0.96667.
    loss, m = dapo_token_loss(torch.zeros(1, 4), logp, torch.ones(1, 4), mask, 0.2, 0.3)
    assert loss.item() == pytest.approx(-2.9 / 3) and m["actor/pg_clipfrac"] == pytest.approx(1 / 3)
    # A = -1: min(-rho, -clip(rho)) = [-1.5, -0.8, -1.1] -> J = -3.4 / 3, loss = +1.13333 (no dual clip).
    loss, m = dapo_token_loss(torch.zeros(1, 4), logp, -torch.ones(1, 4), mask, 0.2, 0.3)
    assert loss.item() == pytest.approx(3.4 / 3) and m["actor/pg_clipfrac_low"] == pytest.approx(1 / 3)
    # A global normalizer (12 action tokens over the mini-batch on 2 ranks): 3.4 / 12 * 2.
    loss, _ = dapo_token_loss(torch.zeros(1, 4), logp, -torch.ones(1, 4), mask, 0.2, 0.3, batch_num_tokens=12, dp_size=2)
    assert loss.item() == pytest.approx(3.4 / 12 * 2)
    # The observation token never counts, whatever its log-prob.
    logp2 = logp.clone()
    logp2[0, 3] = 100.0
    assert dapo_token_loss(torch.zeros(1, 4), logp2, torch.ones(1, 4), mask, 0.2, 0.3)[0].item() == pytest.approx(-2.9 / 3)
