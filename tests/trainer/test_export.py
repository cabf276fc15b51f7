"""`verl-swe export`: a real checkpoint of verl's SFT trainer (FSDP2 on CPU, the RFT recipe with a tiny
model) becomes a Hugging Face model folder, by copying its hf_model or with verl's own model merger from
the shards; RL's layout (global_step_N/actor) is found the same way. The export keeps the recipe's YaRN."""

import asyncio
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from tests.rft.episodes import play, script
from tests.rft.test_sft_cpu import CONFIG_DIR, tiny_overrides
from verl_swe.rft.build import build_sft_data
from verl_swe.testing.tiny import tiny_qwen2
from verl_swe.testing.tokenizer import qwen_tokenizer
from verl_swe.trainer.export import ExportError, export


def cli(*args):
    return subprocess.run([sys.executable, "-m", "verl_swe.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def rft_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rft")
    tok = qwen_tokenizer()
    for i, errors in enumerate([(), (1,)]):  # two distinct trajectories: one step of batch 2
        asyncio.run(play(script("paper", format_errors_at=errors), episode_id=f"t.{i}", run_dir=tmp / "episodes"))
    assert build_sft_data([tmp / "episodes"], tmp / "sft.parquet", tok, max_tokens=8192).kept == 2
    tiny_qwen2(len(tok), hidden_size=128, layers=2).save_pretrained(tmp / "model")
    tok.save_pretrained(tmp / "model")
    overrides = [o for o in tiny_overrides(tmp, tmp / "sft.parquet", tmp / "model") if "total_training_steps" not in o]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1", "-m",
           "verl.trainer.sft_trainer", "--config-path", CONFIG_DIR, "--config-name", "rft_qwen72b", *overrides,
           "trainer.total_training_steps=1"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERL_")}
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, env=env, timeout=900)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    return tmp / "ckpt"  # trainer.default_local_dir


def weights(folder):
    from safetensors.torch import load_file

    return {k: v for f in sorted(folder.glob("*.safetensors")) for k, v in load_file(f).items()}


@pytest.mark.slow
def test_export_by_copy_and_by_verls_merger_agree(rft_run, tmp_path):
    copied = cli("export", rft_run, "--out", tmp_path / "copy")
    assert copied.returncode == 0, copied.stderr
    assert "step 1 (copy)" in copied.stdout and "max_position_embeddings 65536" in copied.stdout
    merged = export(rft_run, tmp_path / "merged", merge=True)  # verl.model_merger from the FSDP shards
    assert json.loads((merged / "export.json").read_text())["source"] == "merger"
    a, b = weights(tmp_path / "copy"), weights(merged)
    assert a.keys() == b.keys() and all(torch.allclose(a[k].float(), b[k].float(), atol=1e-2) for k in a)  # bf16
    # the next stage's model.path / `vllm serve`: a model transformers loads, with the RFT recipe's YaRN x2
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(merged)
    assert config.rope_parameters == {"rope_type": "yarn", "rope_theta": 1e6, "factor": 2.0,
                                      "original_max_position_embeddings": 32768}
    model = AutoModelForCausalLM.from_pretrained(merged)
    ids = AutoTokenizer.from_pretrained(merged)("def f(x):", return_tensors="pt").input_ids
    assert torch.isfinite(model(ids).logits).all()
    assert export(rft_run, tmp_path / "merged", merge=True) == merged  # done already: a rerun is a no-op


@pytest.mark.slow
def test_rl_layout_and_refusals(rft_run, tmp_path):
    run = tmp_path / "stage1"  # verl's PPO trainer: the actor's checkpoint under global_step_N/actor
    shutil.copytree(rft_run / "global_step_1", run / "global_step_1" / "actor")
    (run / "latest_checkpointed_iteration.txt").write_text("1")
    out = export(run)  # into RUN/hf, the next stage's model.path
    assert out == run / "hf" and json.loads((out / "export.json").read_text())["checkpoint"].endswith("actor")
    assert weights(out).keys() == weights(rft_run / "global_step_1" / "huggingface").keys()
    with pytest.raises(ExportError, match="global_step_7 does not exist"):
        export(run, tmp_path / "x", step=7)
    with pytest.raises(ExportError, match="no latest_checkpointed_iteration.txt"):
        export(tmp_path / "empty")
    with pytest.raises(ExportError, match="holds another export"):
        export(rft_run, out)
