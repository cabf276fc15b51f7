"""bench/actor_step_gpu.py runs where the GPU benchmark must: with torch and transformers only (verl, Ray and
vLLM made unimportable here, as on the bare H200 machine), the swe_dapo loss from verl_swe.algo.loss and the
estimate from verl_swe.trainer.plan; at a small size on CPU."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "actor_step_gpu.py"
BARE = ("import runpy, sys\n"
        "for name in ('verl', 'ray', 'vllm', 'transfer_queue', 'flash_attn'): sys.modules[name] = None\n"
        "sys.argv = sys.argv[1:]\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n")


@pytest.mark.slow
def test_the_gpu_benchmark_runs_without_verls_stack(tmp_path):
    out = tmp_path / "bench.json"
    args = ["--device", "cpu", "--tokens", "256,512", "--hidden", "64", "--layers", "2", "--heads", "4",
            "--kv-heads", "2", "--vocab", "2048", "--warmup", "0", "--iters", "1", "--out", str(out)]
    run = subprocess.run([sys.executable, "-c", BARE, str(BENCH), *args], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["machine"]["accelerator"] == "none (CPU)"
    assert [r["tokens"] for r in results["results"]] == [256, 512]
    for r in results["results"]:
        assert r["tokens_per_s"] > 0 and 0 < r["grad_norm"] < float("inf")  # an update happened, finite
        plan = r["plan"]
        head = "LM head, update (log_softmax per row)"
        assert plan["update pass total per GPU"] > plan[head] > 0 and plan["fits"]  # plan.py's estimate, same shape
    assert results["results"][1]["plan"][head] == pytest.approx(
        2 * results["results"][0]["plan"][head], rel=1e-3)  # twice the tokens, twice the logits
    assert "plan: 256 tokens, full head: update pass" in run.stdout  # the verdict, printed before the row
