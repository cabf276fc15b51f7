#!/usr/bin/env bash
# Install what the tests need, then run the whole suite: fast unit tests first, then sandbox tests.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/setup.sh"
cd "$ROOT"
export RAY_AUTH_MODE=disabled
python -m pytest -q -m "not docker and not local and not ray" "$@"
python -m pytest -q -m "docker or local or ray" "$@"
