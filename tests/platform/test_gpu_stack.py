"""The GPU stack check setup.sh runs before it installs anything (and `verl-swe doctor` after): a driver too old
for torch's CUDA build, a torch / vLLM / verl outside verl 0.9.x's stack, or no GPU visible are refused, each
named with its version and the fix; and the installed versions become pip constraints so nothing is replaced."""

import subprocess
import sys

from verl_swe.trainer.gpu_stack import Stack, check, release

GOOD = {"verl": "0.9.1", "torch": "2.11.0+cu130", "vllm": "0.24.0", "transformers": "5.9.0", "flash-attn": "2.8.3"}


def checked(versions=None, cuda="13.0", driver="580.95.05", gpus=None, **kw) -> Stack:
    return check(Stack({**GOOD, **(versions or {})}, torch_cuda=cuda, driver=driver, gpus=gpus), **kw)


def test_verls_own_gpu_stack_on_a_new_enough_driver_passes_with_flash_attention():
    stack = checked(gpus=8, need_gpus=True)
    assert stack.problems == [] and stack.attention == "flash_attention_2"
    assert release("2.11.0+cu130") == (2, 11, 0) and release("0.24.0rc1") == (0, 24, 0)


def test_a_driver_older_than_the_torch_builds_cuda_is_refused_before_anything_is_installed():
    [problem] = checked(driver="550.54.15").problems
    assert "550.54.15" in problem and "580" in problem and "13.0" in problem
    assert checked(cuda="12.8", driver="550.54.15").problems == []  # a CUDA 12 build runs on it
    [missing] = checked(driver=None).problems
    assert "no NVIDIA driver" in missing


def test_an_environment_outside_verls_stack_is_refused_naming_the_versions():
    problems = checked({"vllm": "0.23.1", "torch": "2.9.1+cu128", "transformers": "5.6.0"}, cuda="12.8").problems
    assert len(problems) == 3
    assert any("vllm 0.23.1" in p and "vllm>=0.24,<0.25" in p for p in problems)
    assert any("torch 2.9.1+cu128" in p for p in problems) and any("transformers 5.6.0" in p for p in problems)
    assert any("verl is not installed" in p for p in checked({"verl": None}).problems)


def test_a_cpu_torch_or_no_visible_gpu_is_never_success():
    assert any("CPU build" in p for p in checked(cuda=None).problems)
    [problem] = checked(gpus=0, need_gpus=True).problems
    assert "no GPU is visible" in problem


def test_without_flash_attn_the_choice_is_sdpa_and_its_cost_is_said():
    stack = checked({"flash-attn": None})
    assert stack.problems == [] and stack.attention == "sdpa"
    assert "use_remove_padding=false" in stack.attention_reason and "FLASH_ATTN_WHEEL" in stack.attention_reason
    assert checked({"flash-attn": "2.7.4.post1"}).attention == "sdpa"


def test_the_installed_stack_becomes_pip_constraints():
    out = subprocess.run([sys.executable, "-m", "verl_swe.trainer.gpu_stack", "--constraints"], capture_output=True,
                         text=True, check=True).stdout.split()
    from importlib.metadata import version

    assert f"verl=={version('verl')}" in out and f"torch=={version('torch')}" in out
    # this CPU machine's stack is not the GPU one: the check says so and fails
    done = subprocess.run([sys.executable, "-m", "verl_swe.trainer.gpu_stack"], capture_output=True, text=True)
    assert done.returncode == 1 and "PROBLEM: torch" in done.stdout
