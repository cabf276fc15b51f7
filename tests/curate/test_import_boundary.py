"""Curation installs and runs without the training stack, like the sandbox and task tools it builds on."""

import subprocess
import sys

import pytest

HEAVY = ["torch", "ray", "verl", "vllm", "transformers"]


@pytest.mark.parametrize("module", ["verl_swe.curate.pipeline", "verl_swe.cli.curate", "verl_swe.tasks.rl_data"])
def test_module_imports_without_the_training_stack(module):
    # rl_data builds prompts with the agent's templates; that must not pull the training stack in either
    code = (f"import sys, {module}; from verl_swe.tasks.rl_data import rl_row; from verl_swe.tasks import load_tasks; "
            f"from verl_swe.tasks.repos import mini_dir; rl_row(load_tasks(mini_dir() / 'tasks.jsonl')[0], 0); "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} imports {out.stdout.strip()}"
