"""verl's own SFT trainer (torchrun, FSDP2 over gloo on CPU) trains a tiny Qwen2 for 2 steps on
`verl-swe rft build` parquet through the RFT recipe's config and TrajectorySFTDataset: the overrides
here are the whole difference between the 72B recipe and the tiny CPU pipeline."""

import math
import os
import re
import subprocess
import sys

import pandas as pd
import pytest

from tests.rft.episodes import play, script
from verl_swe.rft.build import build_sft_data
from verl_swe.testing.tiny import tiny_qwen2
from verl_swe.testing.tokenizer import qwen_tokenizer

CONFIG_DIR = os.path.join(os.path.dirname(__import__("verl_swe.trainer.config").trainer.config.__file__))


def tiny_overrides(tmp_path, parquet, model) -> list[str]:
    return [
        f"data.train_files={parquet}", "data.train_batch_size=2", "data.max_length=8192",
        "data.max_token_len_per_gpu=8192", "data.num_workers=0",
        f"model.path={model}", "+model.override_config.attn_implementation=sdpa",
        "engine.ulysses_sequence_parallel_size=1", "engine.use_torch_compile=False",
        "trainer.device=cpu", "trainer.nnodes=1", "trainer.n_gpus_per_node=1", "trainer.total_training_steps=2",
        f"trainer.default_local_dir={tmp_path / 'ckpt'}", "trainer.resume_mode=disable",
    ]


@pytest.mark.slow
async def test_verl_sft_trainer_trains_on_rft_data_on_cpu(tmp_path):
    tok = qwen_tokenizer()
    for i, errors in enumerate([(), (1,), (2, 3), (1, 2, 3)]):  # 4 rows: 2 steps of 2 in the one epoch
        await play(script("paper", format_errors_at=errors), episode_id=f"t.{i}", run_dir=tmp_path / "run")
    report = build_sft_data([tmp_path / "run"], tmp_path / "sft.parquet", tok, max_tokens=8192)
    assert report.kept == 4
    tiny_qwen2(len(tok), hidden_size=128, layers=2).save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")

    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1",
           "-m", "verl.trainer.sft_trainer", "--config-path", CONFIG_DIR, "--config-name", "rft_qwen72b",
           *tiny_overrides(tmp_path, tmp_path / "sft.parquet", tmp_path / "model")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERL_")}  # the plugin picks the CPU platform
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-6000:]

    losses = [float(x) for x in re.findall(r"train/loss:([^ ]+) ", log)]
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses), losses
    # One epoch is every row once: the trainer saw exactly the rows as TrajectorySFTDataset renders them.
    tokens = [float(x) for x in re.findall(r"train/global_tokens:([^ ]+) ", log)]
    assert len(tokens) == 2 and sum(tokens) == pd.read_parquet(tmp_path / "sft.parquet").num_tokens.sum()
    step = tmp_path / "ckpt" / "global_step_2"
    assert (step / "huggingface" / "config.json").is_file()  # hf_model: what the RL stage starts from
    assert any(p.name.endswith(".safetensors") for p in (step / "huggingface").iterdir())
