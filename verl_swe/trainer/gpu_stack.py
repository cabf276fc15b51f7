"""Will this machine's GPU stack run verl-swe? Asked before anything is installed, and again after.

The standard library only: `scripts/setup.sh` runs it with the target environment's own python before it
installs a thing (`python -m verl_swe.trainer.gpu_stack`, the checkout on PYTHONPATH), so a node whose
driver is too old for the torch build, or whose verl environment holds a vLLM or torch this plugin does not
support, is refused with the versions named and nothing replaced. `verl-swe doctor` runs the same checks.

What is supported is verl 0.9.x's own GPU stack (its `vllm` extra, ../shared/docs/gpu-path.md): torch 2.11
built for CUDA 13, vLLM 0.24, transformers within verl's range; flash-attn 2.8 built for that torch.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import importlib.util
import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

# name -> (lowest supported, first unsupported, versions excluded), as release tuples.
SUPPORTED = {
    "verl": ((0, 9, 1), (0, 10), []),
    "torch": ((2, 11), (2, 12), []),  # verl 0.9.1's `vllm` extra: torch==2.11.0
    "vllm": ((0, 24), (0, 25), []),  # ... vllm==0.24.0
    "transformers": ((5, 5, 3), (5, 11), [(5, 6, 0)]),  # verl 0.9.1's own requirement
    "flash-attn": ((2, 8), (2, 9), []),  # verl's `flash-attn-cu130torch211` extra: 2.8.3
}
REQUIRED = ("verl", "torch", "vllm", "transformers")
# The lowest driver that runs a CUDA major version's builds (NVIDIA's minor-version compatibility: any 12.x
# build on a 525 driver, any 13.x build on a 580 driver). torch 2.11.0 from the package index is built for 13.0.
MIN_DRIVER = {12: 525, 13: 580}


def release(version: str) -> tuple[int, ...]:
    """The release numbers of a version string ("2.11.0+cu130" -> (2, 11, 0))."""
    m = re.match(r"\d+(\.\d+)*", version)
    return tuple(int(x) for x in m.group(0).split(".")) if m else ()


def supported(name: str, version: str) -> bool:
    low, high, excluded = SUPPORTED[name]
    v = release(version)
    return low <= v < high and v not in excluded


def range_text(name: str) -> str:
    low, high, excluded = SUPPORTED[name]
    dot = lambda t: ".".join(map(str, t))  # noqa: E731
    return f">={dot(low)},<{dot(high)}" + "".join(f",!={dot(e)}" for e in excluded)


@dataclass
class Stack:
    """What a Python environment holds (dist versions, None when absent) and what the machine has."""

    versions: dict[str, str | None]
    torch_cuda: str | None = None  # the CUDA version torch was built for, from torch/version.py
    driver: str | None = None  # the NVIDIA kernel driver's version
    gpus: int | None = None  # visible GPUs (None: not asked)
    problems: list[str] = field(default_factory=list)
    attention: str = ""  # the attention implementation the recipes will use, and why
    attention_reason: str = ""

    def as_constraints(self) -> list[str]:
        """`name==version` of what is installed, for `pip install -c`: pip then keeps them or refuses."""
        return [f"{n}=={v}" for n, v in self.versions.items() if v and n in SUPPORTED]


def read_stack() -> Stack:
    """This environment's versions and this machine's driver, without importing torch or vLLM."""
    versions = {}
    for name in SUPPORTED:
        try:
            versions[name] = md.version(name)
        except md.PackageNotFoundError:
            versions[name] = None
    return Stack(versions, torch_cuda=_torch_cuda(), driver=_driver_version())


def _torch_cuda() -> str | None:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        text = (Path(list(spec.submodule_search_locations)[0]) / "version.py").read_text()
    except OSError:
        return None
    m = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([\d.]+)['\"]", text, re.M)
    return m.group(1) if m else None


def _driver_version() -> str | None:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
        m = re.search(r"Kernel Module\s+(?:for \S+\s+)?([\d.]+)", text)
        if m:
            return m.group(1)
    except OSError:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.split()[0] if out.returncode == 0 and out.stdout.split() else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def check(stack: Stack, need_stack: bool = True, need_gpus: bool = False, need_driver: bool = True) -> Stack:
    """Fill `stack.problems` (each names what is wrong and the fix) and the attention choice."""
    p = stack.problems
    if need_stack:
        for name in REQUIRED:
            version = stack.versions.get(name)
            if version is None:
                p.append(f"{name} is not installed (supported: {name}{range_text(name)})")
            elif not supported(name, version):
                p.append(f"{name} {version} is installed; verl-swe supports {name}{range_text(name)} (verl 0.9.x's "
                         f"GPU stack): use an environment with it, or `bash scripts/setup.sh` for a new one")
    if stack.torch_cuda is None and stack.versions.get("torch") and need_stack:
        p.append(f"torch {stack.versions['torch']} is a CPU build (no CUDA in torch/version.py): install the CUDA "
                 "build (torch 2.11.0 from the package index is built for CUDA 13.0)")
    cuda_major = release(stack.torch_cuda or "")[:1]
    if cuda_major and need_driver:
        need = MIN_DRIVER.get(cuda_major[0])
        if stack.driver is None:
            p.append(f"no NVIDIA driver found (/proc/driver/nvidia/version, nvidia-smi): torch's CUDA "
                     f"{stack.torch_cuda} build needs driver {need} or newer")
        elif need and release(stack.driver)[:1] < (need,):
            p.append(f"NVIDIA driver {stack.driver} is too old for torch's CUDA {stack.torch_cuda} build (needs {need} "
                     f"or newer): upgrade the driver, or use an environment whose torch is built for an older CUDA")
    if need_gpus and not stack.gpus:
        p.append(f"no GPU is visible to torch ({stack.gpus or 0} devices; CUDA_VISIBLE_DEVICES="
                 f"{os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')})")
    fa = stack.versions.get("flash-attn")
    if fa and supported("flash-attn", fa):
        stack.attention, stack.attention_reason = "flash_attention_2", f"flash-attn {fa} is installed"
    else:
        stack.attention = "sdpa"
        stack.attention_reason = (
            (f"flash-attn {fa} is not supported (flash-attn{range_text('flash-attn')})" if fa else
             "flash-attn is not installed") +
            ", at a cost: verl packs sequences (use_remove_padding, which the shipped recipes set and Ulysses "
            "sequence parallelism needs) with flash-attn's varlen kernels, so under sdpa set use_remove_padding=false "
            "and ulysses_sequence_parallel_size=1: every micro-batch is padded to its longest sequence and one GPU "
            "holds a whole sequence. For the recipes install a prebuilt wheel (FLASH_ATTN_WHEEL=<path or URL> or "
            "FLASH_ATTN_FIND_LINKS=<dir> bash scripts/setup.sh)")
    return stack


def count_gpus() -> int:
    """Visible CUDA devices (imports torch: only once the stack is installed)."""
    import torch

    return torch.cuda.device_count()


def report(stack: Stack) -> str:
    lines = [f"{name:13} {stack.versions.get(name) or '-':14} supported {range_text(name)}" for name in SUPPORTED]
    lines.append(f"{'torch CUDA':13} {stack.torch_cuda or '-':14} driver {stack.driver or '-'}"
                 + (f", {stack.gpus} GPUs visible" if stack.gpus is not None else ""))
    lines.append(f"{'attention':13} {stack.attention:14} {stack.attention_reason}")
    lines += [f"PROBLEM: {problem}" for problem in stack.problems]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--driver-only", action="store_true", help="check only the driver, against --cuda (before "
                        "the stack is installed)")
    parser.add_argument("--cuda", default=None, help="the CUDA version of the torch build to be installed (default: "
                        "the installed torch's, else 13.0: torch 2.11.0 from the package index)")
    parser.add_argument("--no-driver", action="store_true", help="check the installed stack only (an image build: "
                        "no driver or GPU there)")
    parser.add_argument("--gpus", action="store_true", help="require visible GPUs (imports torch)")
    parser.add_argument("--constraints", action="store_true", help="print name==version of the installed stack")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    stack = read_stack()
    if args.cuda or (args.driver_only and stack.torch_cuda is None):
        stack.torch_cuda = args.cuda or "13.0"
    if args.constraints:
        print("\n".join(stack.as_constraints()))
        return 0
    if args.gpus:
        stack.gpus = count_gpus()
    if args.no_driver:
        stack.driver = "(not checked)"
    check(stack, need_stack=not args.driver_only, need_gpus=args.gpus, need_driver=not args.no_driver)
    print(json.dumps(asdict(stack)) if args.json else report(stack))
    return 1 if stack.problems else 0


if __name__ == "__main__":
    sys.exit(main())
