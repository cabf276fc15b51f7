"""Rejection fine-tuning (P1 Sec. 4.2, paper.md 1.5): collect episodes, keep the resolved ones, train on them
with verl's SFT trainer, format-error turns masked.

- `collect`: the RL agent loop over every task N times (verl_swe.agent.rollout), optionally with a one-shot
  demonstration in the system prompt (`demo`), resumable;
- `build`: resolved trajectories -> deduplicated SFT parquet + funnel report (`read`, `render`);
- `dataset`: the verl dataset class (`data.custom_cls`) that renders each row exactly as the rollout did.
"""
