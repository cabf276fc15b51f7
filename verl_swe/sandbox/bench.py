"""`verl-swe sandbox bench`: start, round-trip, close and concurrency of each backend, measured
side by side with the raw engine (`docker exec` per call, `bwrap` per call) in the same run."""

from __future__ import annotations

import asyncio
import platform
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field

from verl_swe.sandbox import DockerSandboxConfig, LocalSandboxConfig, create_sandbox, open_sandbox


@dataclass
class BackendResult:
    backend: str
    start_ms_p50: float = 0.0
    start_ms_p90: float = 0.0
    exec_ms_p50: float = 0.0
    exec_ms_p99: float = 0.0
    close_ms_p50: float = 0.0
    close_ms_p90: float = 0.0
    concurrent_sandboxes: int = 0
    concurrent_commands: int = 0
    concurrent_failures: int = 0
    concurrent_wall_s: float = 0.0
    baseline: str = ""
    baseline_exec_ms_p50: float = 0.0
    baseline_exec_ms_p99: float = 0.0
    errors: list[str] = field(default_factory=list)


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))] * 1000, 3)


def _config(backend: str):
    if backend == "docker":
        return DockerSandboxConfig()
    return LocalSandboxConfig()


async def _lifecycle(backend: str, res: BackendResult, rounds: int) -> None:
    starts, closes = [], []
    for _ in range(rounds):
        sb = create_sandbox(_config(backend))
        t = time.perf_counter()
        await sb.start()
        starts.append(time.perf_counter() - t)
        await sb.exec("true")
        t = time.perf_counter()
        await sb.close()
        closes.append(time.perf_counter() - t)
    res.start_ms_p50, res.start_ms_p90 = _pct(starts, 0.5), _pct(starts, 0.9)
    res.close_ms_p50, res.close_ms_p90 = _pct(closes, 0.5), _pct(closes, 0.9)


async def _round_trips(backend: str, res: BackendResult, calls: int) -> None:
    async with open_sandbox(_config(backend)) as sb:
        for _ in range(20):  # warm-up
            await sb.exec("true")
        times = []
        for _ in range(calls):
            t = time.perf_counter()
            await sb.exec("true", timeout=30)
            times.append(time.perf_counter() - t)
    res.exec_ms_p50, res.exec_ms_p99 = _pct(times, 0.5), _pct(times, 0.99)


async def _concurrent(backend: str, res: BackendResult, sandboxes: int, commands: int) -> None:
    failures = 0

    async def one(i: int) -> None:
        nonlocal failures
        try:
            async with open_sandbox(_config(backend)) as sb:
                for j in range(commands):
                    r = await sb.exec(f"echo {i}-{j}", timeout=120)
                    failures += r.output != f"{i}-{j}\n"
        except Exception:  # noqa: BLE001 - a failure is what we count here
            failures += commands

    t = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(sandboxes)))
    res.concurrent_wall_s = round(time.perf_counter() - t, 2)
    res.concurrent_sandboxes, res.concurrent_commands, res.concurrent_failures = sandboxes, commands, failures


def _baseline(backend: str, res: BackendResult, calls: int) -> None:
    """The raw engine, one process per call: what a sandbox without a persistent shell pays."""
    times = []
    if backend == "docker":
        import docker

        from verl_swe.sandbox.config import BASE_IMAGE, LABEL, owner_id

        res.baseline = "docker exec per call"
        labels = {LABEL: "1", f"{LABEL}.owner": owner_id()}  # `sandbox gc` finds it if we crash
        container = docker.from_env().containers.run(BASE_IMAGE, ["sleep", "infinity"], detach=True,
                                                      network_mode="none", init=True, labels=labels)
        try:
            for _ in range(calls):
                t = time.perf_counter()
                subprocess.run(["docker", "exec", container.id, "true"], check=True)
                times.append(time.perf_counter() - t)
        finally:
            container.remove(force=True)
    else:
        res.baseline = "bwrap per call"
        cmd = ["bwrap", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--unshare-all",
               "--die-with-parent", "true"]
        for _ in range(calls):
            t = time.perf_counter()
            subprocess.run(cmd, check=True)
            times.append(time.perf_counter() - t)
    res.baseline_exec_ms_p50, res.baseline_exec_ms_p99 = _pct(times, 0.5), _pct(times, 0.99)


async def run_backend(backend: str, calls: int = 2000, rounds: int = 20, sandboxes: int = 64,
                      commands: int = 20, baseline_calls: int = 100) -> BackendResult:
    res = BackendResult(backend)
    for step in (lambda: _lifecycle(backend, res, rounds), lambda: _round_trips(backend, res, calls),
                 lambda: _concurrent(backend, res, sandboxes, commands)):
        try:
            await step()
        except Exception as e:  # noqa: BLE001 - report it in the table, go on with the other numbers
            res.errors.append(repr(e))
    if shutil.which("docker" if backend == "docker" else "bwrap"):
        try:
            await asyncio.to_thread(_baseline, backend, res, baseline_calls)
        except Exception as e:  # noqa: BLE001
            res.errors.append(f"baseline: {e!r}")
    return res


def machine() -> dict:
    import os

    return {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version()}


def as_dicts(results: list[BackendResult]) -> list[dict]:
    return [asdict(r) for r in results]

