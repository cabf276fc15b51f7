"""The pieces as verl sees them: verl's own GRPO advantage is P1 Eq. 2, and the registered `swe_dapo`
loss is Eq. 8 with verl's global batch info."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch


def test_verls_grpo_is_eq2():
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    from verl_swe.algo.advantages import group_advantages

    rewards = torch.tensor([0.5, 0.0, -1.0, 1.0, 1.0, 0.0, 0.0, 1.0])
    groups = ["a", "a", "a", "b", "b", "c", "c", "c"]
    mask = torch.ones(8, 3)
    token_rewards = torch.zeros(8, 3)
    token_rewards[:, -1] = rewards  # the trajectory's reward sits on its last token
    adv, _ = compute_grpo_outcome_advantage(token_rewards, mask, np.array(groups))
    torch.testing.assert_close(adv[:, 0], group_advantages(rewards, groups), rtol=1e-5, atol=1e-5)


def test_registered_loss():
    import verl  # noqa: F401 - loads the plugin
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    fn = get_policy_loss_fn("swe_dapo")
    cfg = SimpleNamespace(clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.3,
                          global_batch_info={"batch_num_tokens": 12, "dp_size": 2})
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.1, 7.0]]))
    mask = torch.tensor([[1, 1, 1, 0]]).bool()
    loss, metrics = fn(old_log_prob=torch.zeros(1, 4), log_prob=logp, advantages=-torch.ones(1, 4),
                       response_mask=mask, loss_agg_mode="token-mean", config=cfg, rollout_is_weights=None)
    assert loss.item() == pytest.approx(3.4 / 12 * 2)  # tests/algo/test_advantages_and_loss.py derives 3.4
    weights = torch.tensor([[0.5, 0.5, 0.5, 0.5]])
    half, _ = fn(old_log_prob=torch.zeros(1, 4), log_prob=logp, advantages=-torch.ones(1, 4), response_mask=mask,
                 loss_agg_mode="token-mean", config=cfg, rollout_is_weights=weights)
    assert half.item() == pytest.approx(loss.item() / 2)
    with pytest.raises(ValueError, match="token mean"):
        fn(old_log_prob=torch.zeros(1, 4), log_prob=logp, advantages=torch.ones(1, 4), response_mask=mask,
           loss_agg_mode="seq-mean-token-mean", config=cfg)


def test_the_plugin_loads_cleanly_in_a_fresh_verl_process():
    # verl swallows plugin import errors (logged at DEBUG): check the registrations happened.
    import subprocess
    import sys

    code = ("import verl, sys; from verl.trainer.ppo.core_algos import get_policy_loss_fn; "
            "from verl.experimental.agent_loop.agent_loop import _agent_loop_registry; "
            "get_policy_loss_fn('swe_dapo'); assert 'swe_agent' in _agent_loop_registry; "
            # trainer.v1.trainer_mode=swe_sync, resolved as verl's task runner resolves it (main_ppo.py)
            "from verl.trainer.ppo.v1 import get_trainer_cls; "
            "assert get_trainer_cls('swe_sync').__name__ == 'SpreadPaddingSyncTrainer'; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


def test_metrics_verl_also_logs_have_verls_names_and_values():
    # verl's vanilla PPO loss on the same tokens (dual clip far away: no token reaches clip_ratio_c = 10) logs
    # pg_clipfrac, ppo_kl and pg_clipfrac_lower; swe_dapo logs each under the same name with the same value.
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    from verl_swe.algo.loss import dapo_token_loss

    class Cfg(SimpleNamespace):
        def get(self, key, default=None):
            return getattr(self, key, default)

    cfg = Cfg(clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.3, clip_ratio_c=10.0,
              global_batch_info={"batch_num_tokens": 4, "dp_size": 1})
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.1, 0.7, 7.0]]))
    old = torch.tensor([[0.0, 0.1, -0.2, 0.0, 0.0]])
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0, 1.0]])
    mask = torch.tensor([[1, 1, 1, 1, 0]]).bool()
    _, theirs = get_policy_loss_fn("vanilla")(old_log_prob=old, log_prob=logp, advantages=adv, response_mask=mask,
                                              loss_agg_mode="token-mean", config=cfg, rollout_is_weights=None)
    _, ours = dapo_token_loss(old, logp, adv, mask, 0.2, 0.3)
    assert set(theirs) <= set(ours)
    for name, value in theirs.items():
        assert ours[name] == pytest.approx(value), name
    assert ours["actor/pg_clipfrac"] > 0 and ours["actor/pg_clipfrac_lower"] == 0.0
