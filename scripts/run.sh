#!/usr/bin/env bash
# The main job on its embedded default: install everything, then benchmark both sandbox backends
# against the raw engine (the tiny CPU RFT + DAPO pipeline replaces this once it lands).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/setup.sh"
verl-swe sandbox bench "$@"
