#!/usr/bin/env bash
# The main job on its embedded default: the whole pipeline on one CPU (recipes/run_dapo_tiny_cpu.sh).
set -euo pipefail
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/recipes/run_dapo_tiny_cpu.sh" "$@"
