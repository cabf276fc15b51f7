"""The GPU stack, resolved by pip for a Linux x86_64 CUDA host from any machine (no GPU needed).

    python scripts/gpu_lock.py --check     pip resolves pyproject's dependencies + [gpu,dev] under
                                           scripts/gpu-constraints.txt; exit 1 naming what it refuses
    python scripts/gpu_lock.py --write     resolve without the lock and write it anew (review the diff)

It runs `pip install --dry-run --report` for CPython 3.12 on manylinux_2_17..2_31 x86_64 with binary
wheels only (the GPU host installs no source archive but flash-attn, outside this set), ignoring this
machine's own pip configuration (`--isolated`: here a constraint caps torch at the CPU build on disk), so
the answer is PyPI's. The lock pins every package setup.sh's GPU branch installs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "scripts" / "gpu-constraints.txt"
PLATFORMS = [f"manylinux_2_{v}_x86_64" for v in range(17, 32)] + ["manylinux2014_x86_64", "linux_x86_64"]
HEADER = """# The GPU stack of verl-swe, every package pinned: scripts/setup.sh installs `.[dev,gpu]` under this file on a
# CUDA host. Resolved by pip for CPython 3.12, Linux x86_64 (manylinux_2_31: glibc >= 2.31), binary wheels,
# from PyPI: `python scripts/gpu_lock.py --write`; checked by `--check` (tests/platform/test_gpu_install.py).
# Anchors (verl 0.9.1's `vllm` extra): torch 2.11.0 (CUDA 13), vLLM 0.24.0, transformers 5.9.0.
# Not here: flash-attn 2.8.3 (no wheel on PyPI; setup.sh builds it or installs FLASH_ATTN_WHEEL).
"""


def requirements() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [*project["dependencies"], *extras["gpu"], *extras["dev"]]


def resolve(constraints: Path | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--ignore-installed", "--quiet",
               "--no-cache-dir", "--report", str(report), "--python-version", "3.12", "--implementation", "cp",
               "--abi", "cp312", "--abi", "abi3", "--abi", "none", "--only-binary=:all:",
               *[a for p in PLATFORMS for a in ("--platform", p)], *requirements()]
        if constraints:
            cmd += ["-c", str(constraints)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"pip refused the GPU stack:\n{(done.stdout + done.stderr)[-4000:]}")
        return json.loads(report.read_text())


def pins(report: dict) -> dict[str, str]:
    return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in report["install"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--write", action="store_true")
    args = parser.parse_args()
    resolved = pins(resolve(None if args.write else LOCK))
    if args.write:
        LOCK.write_text(HEADER + "".join(f"{name}=={version}\n" for name, version in sorted(resolved.items())))
    print(json.dumps({"packages": len(resolved), **{k: resolved.get(k) for k in
                                                  ("torch", "vllm", "transformers", "verl", "ray", "flash-attn")}}))


if __name__ == "__main__":
    main()
