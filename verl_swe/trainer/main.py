"""Entry point of the recipes: verl's PPO trainer with the plugin's config, after a preflight that
refuses bad configs before any GPU is touched.

    python -m verl_swe.trainer.main --config-name swe_dapo_qwen72b [hydra overrides] [--cfg job]
"""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from verl_swe.trainer.preflight import PreflightError, preflight, write_agent_loop_config
from verl_swe.trainer.resume import set_aside_unfinished
from verl_swe.trainer.run_checks import absolute_run_paths


@hydra.main(config_path="config", config_name="swe_dapo_qwen72b", version_base=None)
def main(config: DictConfig) -> None:
    try:
        report = preflight(config)
    except PreflightError as e:
        raise SystemExit(f"verl-swe preflight refused this run:\n{e}") from None
    print(report)
    run_dir = absolute_run_paths(config)  # absolute from here on (run_checks.py)
    trajectory_dir = OmegaConf.select(config, "swe.agent.trajectory_dir")
    if trajectory_dir:
        moved = set_aside_unfinished(Path(trajectory_dir), run_dir, resuming=config.trainer.resume_mode != "disable")
        if moved:
            print(f"verl-swe: set aside {moved} trajectories of steps no checkpoint holds (they will be re-run): "
                  f"{trajectory_dir}/trajectories.unfinished/")
    path = write_agent_loop_config(config, run_dir)
    OmegaConf.update(config, "actor_rollout_ref.rollout.agent.agent_loop_config_path", str(path))
    from verl.trainer import main_ppo

    main_ppo.main.__wrapped__(config)  # verl's own main, minus its @hydra.main


if __name__ == "__main__":
    main()
