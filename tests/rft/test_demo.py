"""The collection demonstration: rendered from a trajectory, appended between markers, removed exactly."""

import json
import subprocess
import sys

import pytest

from tests.rft.episodes import default_system, play, script
from verl_swe.agent.config import AgentConfig
from verl_swe.rft.collect import RunDirMismatch, claim_run_dir, collection_config
from verl_swe.rft.demo import DEMO_CLOSE, DEMO_OPEN, DemoError, load_demo, strip_demo, with_demo
from verl_swe.testing.tokenizer import qwen_tokenizer


async def test_a_trajectory_file_renders_as_task_responses_and_observations(tmp_path):
    res = await play(script("paper", format_errors_at=(), turns=3))
    path = tmp_path / "demo.json"
    path.write_text(json.dumps(res.trajectory.to_dict()))
    demo = load_demo(path)
    assert demo.startswith("[TASK]\nFix the bug.\n\n[RESPONSE]\nStep 0:")
    assert demo.count("[RESPONSE]") == 3 and demo.count("[OBSERVATION]") == 2
    assert default_system("paper") not in demo  # the demo's own system prompt is not repeated


def test_strip_undoes_with_demo_exactly():
    prompt = default_system("paper")
    assert strip_demo(with_demo(prompt, "[TASK]\nx")) == (prompt, True)
    assert strip_demo(prompt) == (prompt, False)
    with pytest.raises(DemoError, match="malformed"):
        strip_demo(prompt + "\n\n" + DEMO_OPEN + "\nno end")


def test_bad_demonstrations_are_refused_by_name(tmp_path):
    with pytest.raises(DemoError, match=r"special tokens \['<\|im_end\|>'\]"):
        with_demo("sys", "x<|im_end|>y", qwen_tokenizer().all_special_tokens)
    with pytest.raises(DemoError, match="marker"):
        with_demo("sys", f"x {DEMO_CLOSE}")
    (tmp_path / "bad.json").write_text('{"instance_id": "x", "turns": [')
    with pytest.raises(DemoError, match=r"bad\.json: not a trajectory JSON"):
        load_demo(tmp_path / "bad.json")
    with pytest.raises(DemoError, match=r"missing\.txt"):
        load_demo(tmp_path / "missing.txt")


def test_collection_config_appends_to_the_agents_own_prompt():
    cfg = collection_config(AgentConfig(), "[TASK]\nx")
    assert strip_demo(cfg.system_prompt) == (default_system("paper"), True)
    assert collection_config(AgentConfig(), None).system_prompt is None


def test_a_run_dir_is_resumed_only_with_its_demonstration(tmp_path):
    claim_run_dir(tmp_path / "run", "demo A", "a.txt", "m", "paper")
    claim_run_dir(tmp_path / "run", "demo A", "a.txt", "m", "paper")  # resuming with the same one is fine
    assert (tmp_path / "run" / "demo.txt").read_text() == "demo A\n"
    with pytest.raises(RunDirMismatch, match="another demonstration"):
        claim_run_dir(tmp_path / "run", "demo B", "b.txt", "m", "paper")
    with pytest.raises(RunDirMismatch, match="another demonstration"):
        claim_run_dir(tmp_path / "run", None, None, "m", "paper")
    with pytest.raises(RunDirMismatch, match="another tool set"):
        claim_run_dir(tmp_path / "run", "demo A", "a.txt", "m", "native")


@pytest.mark.parametrize("module", ["verl_swe.rft.build", "verl_swe.rft.collect", "verl_swe.cli.rft"])
def test_collect_and_build_import_without_the_training_stack(module):
    # Only the dataset class (loaded by verl's trainer) needs torch and verl; a tokenizer is passed in.
    heavy = ["torch", "ray", "verl", "vllm", "transformers"]
    code = f"import sys, {module}; print(','.join(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} imports {out.stdout.strip()}"
