#!/usr/bin/env bash
# The same algorithm on one node: Qwen2.5-7B-Instruct on 8 GPUs (verl_swe/trainer/config/swe_dapo_qwen7b.yaml).
#   bash recipes/run_dapo_qwen7b.sh [hydra overrides] [--cfg job]
set -euo pipefail
exec python -m verl_swe.trainer.main --config-name swe_dapo_qwen7b "$@"
