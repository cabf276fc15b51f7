#!/usr/bin/env bash
# Install and start everything verl-swe needs on a fresh Debian/Ubuntu machine, idempotently:
# system packages (docker engine, bubblewrap, debootstrap), a running dockerd, the offline base
# image, and the Python environment in .venv. Sourced by scripts/run.sh and scripts/test.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"

need_apt=()
command -v dockerd >/dev/null || need_apt+=(docker.io)
command -v bwrap >/dev/null || need_apt+=(bubblewrap)
command -v debootstrap >/dev/null || need_apt+=(debootstrap)
command -v nsenter >/dev/null || need_apt+=(util-linux)
if ((${#need_apt[@]})); then
  echo "[setup] apt-get install ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# A docker engine: the one DOCKER_HOST (or the default socket) points at, else start one. No
# iptables or bridge: sandboxes run with --network none, and many CI hosts forbid both.
if ! docker info >/dev/null 2>&1; then
  echo "[setup] starting dockerd (log: /tmp/verl-swe-dockerd.log)"
  $SUDO sh -c 'nohup dockerd --iptables=false --ip6tables=false --bridge=none --storage-driver=overlay2 \
    >/tmp/verl-swe-dockerd.log 2>&1 &'
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { tail -n 20 /tmp/verl-swe-dockerd.log; echo "[setup] dockerd did not start" >&2; exit 1; }
fi

bash "$ROOT/envs/base/build.sh"

# The Python environment, reinstalled only when pyproject.toml changes.
VENV="$ROOT/.venv"
STAMP="$VENV/.verl-swe-installed"
HASH=$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)
if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$HASH" ]]; then
  echo "[setup] installing verl-swe and its pinned training stack into .venv"
  [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip >/dev/null
  "$VENV/bin/pip" install -q -e "$ROOT[dev]"
  echo "$HASH" >"$STAMP"
fi
export PATH="$VENV/bin:$PATH"
