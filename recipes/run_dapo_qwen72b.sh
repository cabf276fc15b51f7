#!/usr/bin/env bash
# The paper's RL on Qwen2.5-72B-Instruct (16 nodes x 8 H200, Ray cluster already up; RAY_ADDRESS to join it).
#   bash recipes/run_dapo_qwen72b.sh [hydra overrides]      stage 1: 65k context, 40 turns, clip (0.2, 0.3)
#   STAGE=2 bash recipes/run_dapo_qwen72b.sh                stage 2: 131k, YaRN x4, 80 turns, clip (0.2, 0.26)
#   bash recipes/run_dapo_qwen72b.sh --cfg job              print the composed config, start nothing
# Values and their sources: verl_swe/trainer/config/swe_dapo_qwen72b*.yaml.
set -euo pipefail
CONFIG=swe_dapo_qwen72b
[[ "${STAGE:-1}" == 2 ]] && CONFIG=swe_dapo_qwen72b_stage2
exec python -m verl_swe.trainer.main --config-name "$CONFIG" "$@"
