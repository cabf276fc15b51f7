"""Overlong options, the unbiased-sampling guard, log-prob mismatch and the stage-2 curriculum."""

import math

import pytest
import torch

from verl_swe.algo.curriculum import SuccessCounts, stage2_pool
from verl_swe.algo.overlong import mask_truncated, soft_overlong_penalty
from verl_swe.algo.sampling import UNBIASED, logprob_mismatch, sampling_problems


def test_soft_overlong_penalty_eq13():
    # L_max = 20, L_cache = 4: no penalty up to 16, linear to -1 at 20, -1 beyond: (16 - 18) / 4 = -0.5.
    assert soft_overlong_penalty(torch.tensor([10, 16, 18, 20, 25]), 20, 4).tolist() == [0.0, 0.0, -0.5, -1.0, -1.0]
    with pytest.raises(ValueError, match="cache_len"):
        soft_overlong_penalty(torch.tensor([1]), 10, 0)


def test_mask_truncated():
    mask = torch.ones(3, 2, dtype=torch.long)
    assert mask_truncated(mask, torch.tensor([False, True, False])).tolist() == [[1, 1], [0, 0], [1, 1]]


def test_sampling_guard():
    assert sampling_problems(UNBIASED) == []
    assert sampling_problems({**UNBIASED, "top_k": 0}) == []  # HF's spelling of "off"
    probs = sampling_problems({"temperature": 0.7, "top_p": 0.95, "top_k": -1})
    assert probs == ["rollout temperature=0.7 (unbiased: 1.0)", "rollout top_p=0.95 (unbiased: 1.0)"]
    # The paper's failure: the engine picks top_k/min_p up from the model's generation_config.
    gen_cfg = {"top_k": 20, "min_p": 0.0, "top_p": 0.8, "temperature": 0.7}
    leaks = sampling_problems({"temperature": 1.0, "top_p": 1.0}, gen_cfg)
    assert len(leaks) == 1 and "generation_config sets top_k=20" in leaks[0]
    assert sampling_problems({"temperature": 1.0, "top_p": 1.0}, gen_cfg, engine_uses_generation_config=False) == []


def test_logprob_mismatch():
    rollout = torch.log(torch.tensor([[0.5, 0.25, 0.9]]))
    trainer = torch.log(torch.tensor([[0.5, 0.5, 0.1]]))
    mask = torch.tensor([[1, 1, 0]])
    m = logprob_mismatch(rollout, trainer, mask)
    # masked tokens: r = 1 and 2 -> k3 = (0) and (2 - 1 - ln 2) = 0.30685 -> mean 0.15343; max |ln r| = ln 2
    assert m["swe/logprob_mismatch_kl"] == pytest.approx((1 - math.log(2)) / 2)
    assert m["swe/logprob_mismatch_max_abs"] == pytest.approx(math.log(2))


def test_stage2_pool(tmp_path):
    c = SuccessCounts()
    c.update([("easy", True)] * 3 + [("easy", False)] + [("never", False)] * 4 + [("hard", True), ("hard", False),
              ("hard", False)] + [("twothirds", True), ("twothirds", True), ("twothirds", False)])
    # easy 3/4 >= 2/3 out, never 0/4 out, hard 1/3 kept, twothirds exactly 2/3 out, unseen kept
    assert stage2_pool(c, ["easy", "never", "hard", "twothirds", "unseen"]) == ["hard", "unseen"]
    c.save(tmp_path / "counts.json")
    assert SuccessCounts.load(tmp_path / "counts.json") == c
