"""The negative control as verl's trainer calls it: verl's compute_advantage with the registered name gives
exactly minus verl's GRPO advantages (P1 Eq. 2)."""

import numpy as np
import torch


def test_sign_flipped_control_is_minus_grpo_through_verls_call_site():
    import verl  # noqa: F401 - loads the plugin (registers the estimator)
    from omegaconf import OmegaConf
    from verl import DataProto
    from verl.trainer.ppo.ray_trainer import compute_advantage

    rewards = torch.tensor([1.0, 0.0, 0.0, -0.25, 0.5, 0.0])
    token_rewards = torch.zeros(6, 4)
    token_rewards[:, -1] = rewards
    mask = torch.ones(6, 4)
    mask[0, 2:] = 0

    def advantages(estimator: str) -> torch.Tensor:
        data = DataProto.from_dict(tensors={"token_level_rewards": token_rewards, "response_mask": mask},
                                   non_tensors={"uid": np.array(["a", "a", "a", "b", "b", "b"], dtype=object)})
        config = OmegaConf.create({"norm_adv_by_std_in_grpo": True})
        return compute_advantage(data, adv_estimator=estimator, config=config).batch["advantages"]

    grpo, flipped = advantages("grpo"), advantages("grpo_sign_flipped")
    assert grpo.abs().sum() > 0
    torch.testing.assert_close(flipped, -grpo)
    assert flipped[0, 0] < 0 and flipped[1, 0] > 0  # the group's resolved rollout is pushed down
