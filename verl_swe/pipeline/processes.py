"""Child processes of the CPU pipeline: verl's trainers and vLLM's server, each in its own process group
with a log file, killed whole (Ray and vLLM spawn trees of workers) on timeout, error or Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

# What every child needs on a CPU host (../shared/docs/cpu-e2e.md): no Ray token auth, a small vLLM KV
# cache (GiB of host memory), one tokenizer thread per process on 2 cores.
CPU_ENV = {"RAY_AUTH_MODE": "disabled", "VLLM_CPU_KVCACHE_SPACE": "1", "TOKENIZERS_PARALLELISM": "false"}


class StageFailed(RuntimeError):
    """A child process failed; the message names the command's log."""


def _shm_segments() -> set[str]:
    shm = Path("/dev/shm")
    return {p.name for p in shm.glob("psm_*")} | {p.name for p in shm.glob("verl_weights_*")} if shm.is_dir() else set()


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def child(cmd: list[str], log: Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> Iterator[subprocess.Popen]:
    """Run `cmd` with stdout+stderr to `log`; on leaving, kill its whole process group and remove the shared
    memory it leaked (vLLM engines leave `psm_*` segments even on a clean exit: obstacle 13)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    before = _shm_segments()
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True,
                                env={**os.environ, **CPU_ENV, **(env or {})})
        try:
            yield proc
        finally:
            if proc.poll() is None:
                _kill_group(proc)
            else:  # exited: its workers (Ray's raylet, vLLM's engine) may still be alive in its group
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            for name in _shm_segments() - before:
                with contextlib.suppress(OSError):
                    os.unlink(f"/dev/shm/{name}")


def run_logged(cmd: list[str], log: Path, timeout_s: float, env: dict[str, str] | None = None,
               cwd: Path | None = None) -> None:
    """Run `cmd` to completion; raise StageFailed (naming the log and its last lines) on error or timeout."""
    with child(cmd, log, env, cwd) as proc:
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise StageFailed(f"timed out after {timeout_s:.0f} s: {' '.join(cmd[:6])} ... (log: {log})") from None
    if rc != 0:
        tail = log.read_text(errors="replace").splitlines()[-25:]
        raise StageFailed(f"exit status {rc}: {' '.join(cmd[:6])} ... (log: {log})\n" + "\n".join(tail))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def vllm_server(model_dir: Path, name: str, max_model_len: int, log: Path, start_timeout_s: float = 600,
                seed: int = 0, dtype: str = "auto") -> Iterator[str]:
    """vLLM's OpenAI-compatible server for `model_dir` (vllm-cpu here, vLLM on a GPU host): yields its URL.
    `seed` is the engine's sampling seed (requests carry none); `dtype` its compute dtype."""
    port = free_port()
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
           "--served-model-name", name, "--host", "127.0.0.1", "--port", str(port), "--seed", str(seed),
           "--dtype", dtype, "--max-model-len", str(max_model_len), "--generation-config", "vllm",
           "--disable-log-stats"]
    url = f"http://127.0.0.1:{port}"
    with child(cmd, log) as proc:
        deadline = time.monotonic() + start_timeout_s
        while True:
            if proc.poll() is not None:
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
                raise StageFailed(f"vLLM server exited with status {proc.returncode} (log: {log})\n{tail}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            if time.monotonic() > deadline:
                raise StageFailed(f"vLLM server not ready after {start_timeout_s:.0f} s (log: {log})")
            time.sleep(1)
        yield f"{url}/v1"
