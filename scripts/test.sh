#!/usr/bin/env bash
# Install what the tests need, then run the whole suite: fast unit tests, sandbox tests, then end-to-end training.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/setup.sh"
cd "$ROOT"
export RAY_AUTH_MODE=disabled
python -m pytest -q -m "not docker and not local and not ray and not e2e" "$@"
python -m pytest -q -m "(docker or local or ray) and not e2e" "$@"
# The CPU pipeline end to end (real verl trainers, vLLM-CPU, sandboxes): ~9 GiB each, one at a time.
python -m pytest -q -m e2e "$@"
