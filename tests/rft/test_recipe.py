"""The RFT recipe composes on CPU with the paper's values (P1 App. C) and prints its config with --cfg job."""

import subprocess
from pathlib import Path

import yaml
from hydra import compose, initialize_config_module

ROOT = Path(__file__).resolve().parents[2]


def test_rft_config_has_the_papers_values():
    with initialize_config_module("verl_swe.trainer.config", version_base=None):
        c = compose(config_name="rft_qwen72b")
    assert c.model.path == "Qwen/Qwen2.5-72B-Instruct" and c.data.max_length == 65536  # 65k context
    o = c.optim
    assert (o.lr, o.lr_warmup_steps, o.lr_scheduler_type, o.min_lr_ratio) == (5e-6, 10, "cosine", 0.0)
    assert o.optimizer == "AdamW" and o.weight_decay == 0.1 and list(o.betas) == [0.9, 0.999]
    assert c.data.train_batch_size == 64 and c.trainer.total_epochs == 1
    assert c.data.custom_cls.path == "pkg://verl_swe.rft.dataset" and c.data.custom_cls.name == "TrajectorySFTDataset"
    sp = c.engine.ulysses_sequence_parallel_size
    assert sp > 1 and c.model.use_remove_padding  # verl requires remove_padding with sequence parallelism
    assert c.data.max_token_len_per_gpu * sp >= c.data.max_length  # one full-length trajectory fits a micro-batch
    dp = c.trainer.nnodes * c.trainer.n_gpus_per_node // sp
    assert c.data.train_batch_size % dp == 0  # verl splits the global batch evenly over data-parallel ranks


def test_recipe_prints_the_composed_config(tmp_path):
    out = subprocess.run(["bash", str(ROOT / "recipes/run_rft_qwen72b.sh"), "--cfg", "job", "optim.lr=1e-5"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    cfg = yaml.safe_load(out.stdout)
    assert cfg["optim"]["lr"] == 1e-5 and cfg["data"]["train_batch_size"] == 64
    assert cfg["data"]["custom_cls"]["name"] == "TrajectorySFTDataset"
