"""The sandbox, tasks and data tools must install and run without the training stack."""

import subprocess
import sys

import pytest

LIGHT_MODULES = [
    "verl_swe.types",
    "verl_swe.files",
    "verl_swe.concurrency",
    "verl_swe.sandbox",
    "verl_swe.sandbox.docker",
    "verl_swe.sandbox.local",
    "verl_swe.sandbox.pool",
    "verl_swe.sandbox.remote",
    "verl_swe.sandbox.gc",
    "verl_swe.sandbox.bench",
    "verl_swe.cli",
    "verl_swe.tasks",
    "verl_swe.tasks.env_docker",
    "verl_swe.tasks.env_local",
    "verl_swe.reward.patch_guard",
    "verl_swe.reward.grading",
    "verl_swe.reward.evaluate",
    "verl_swe.tools",
    "verl_swe.tools.aci",
    # the agent outside training (rollout CLI, eval, RFT collection) needs no training stack either
    "verl_swe.agent.episode",
    "verl_swe.agent.runner",
    "verl_swe.agent.placement",
    "verl_swe.agent.placement_ray",
    "verl_swe.agent.rollout",
    "verl_swe.agent.llm_openai",
    # swebench's parsers and grading, which grading imports lazily
    "swebench.harness.grading",
]
HEAVY = ["torch", "ray", "verl", "vllm", "transformers"]


@pytest.mark.parametrize("module", LIGHT_MODULES)
def test_module_imports_without_the_training_stack(module):
    # A fresh interpreter, so modules imported by other tests do not hide an import.
    code = f"import sys, {module}; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} imports {out.stdout.strip()}"
