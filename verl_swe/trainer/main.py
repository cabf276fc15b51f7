"""Entry point of the recipes: verl's PPO trainer with the plugin's config, after a preflight that
refuses bad configs before any GPU is touched.

    python -m verl_swe.trainer.main --config-name swe_dapo_qwen72b [hydra overrides] [--cfg job]
"""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from verl_swe.trainer.preflight import PreflightError, preflight, write_agent_loop_config


@hydra.main(config_path="config", config_name="swe_dapo_qwen72b", version_base=None)
def main(config: DictConfig) -> None:
    try:
        report = preflight(config)
    except PreflightError as e:
        raise SystemExit(f"verl-swe preflight refused this run:\n{e}") from None
    print(report)
    path = write_agent_loop_config(config, Path(config.trainer.default_local_dir))
    OmegaConf.update(config, "actor_rollout_ref.rollout.agent.agent_loop_config_path", str(path))
    from verl.trainer import main_ppo

    main_ppo.main.__wrapped__(config)  # verl's own main, minus its @hydra.main


if __name__ == "__main__":
    main()
