"""TrajectorySFTDataset as verl's SFT trainer builds it (`data.custom_cls`), with verl's data options."""

import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf
from verl.trainer.sft_trainer import create_sft_dataset
from verl.utils.dataset.dataset_utils import SFTTensorCollator

from tests.rft.episodes import play, script
from verl_swe.rft.build import build_sft_data
from verl_swe.rft.dataset import TrajectorySFTDataset
from verl_swe.testing.tokenizer import qwen_tokenizer


def data_config(**kw):
    base = OmegaConf.load(__import__("verl").__path__[0] + "/trainer/config/sft_trainer_engine.yaml").data
    base.custom_cls = {"path": "pkg://verl_swe.rft.dataset", "name": "TrajectorySFTDataset"}
    return OmegaConf.merge(base, kw)


@pytest.fixture
async def parquet(tmp_path):
    await play(script("paper"), episode_id="t.0", run_dir=tmp_path / "run")
    await play(script("native"), tool_set="native", episode_id="t.1", run_dir=tmp_path / "run")
    build_sft_data([tmp_path / "run"], tmp_path / "sft.parquet", qwen_tokenizer(), max_tokens=100_000)
    return tmp_path / "sft.parquet"


def test_verl_loads_the_class_from_custom_cls_and_batches_it(parquet):
    ds = create_sft_dataset(str(parquet), data_config(max_length=4096), qwen_tokenizer(), None)
    assert type(ds).__name__ == "TrajectorySFTDataset" and len(ds) == 2
    batch = SFTTensorCollator("no_padding")([ds[0], ds[1]])  # what verl's dataloader does with no_padding
    assert batch["input_ids"].is_nested and batch["loss_mask"].is_nested
    lengths = pd.read_parquet(parquet).num_tokens.tolist()
    assert batch["input_ids"].offsets().diff().tolist() == lengths


def test_right_padding_pads_to_max_length_with_no_loss(parquet):
    ds = create_sft_dataset(str(parquet), data_config(max_length=4096, pad_mode="right"), qwen_tokenizer(), None)
    item, n = ds[0], int(pd.read_parquet(parquet).num_tokens[0])
    assert item["input_ids"].shape == item["loss_mask"].shape == item["attention_mask"].shape == (4096,)
    assert item["attention_mask"].sum() == n and item["loss_mask"][n:].sum() == 0
    assert item["input_ids"][n:].eq(qwen_tokenizer().pad_token_id).all()


def test_a_row_over_max_length_names_itself_or_is_truncated_as_configured(parquet):
    n = int(pd.read_parquet(parquet).num_tokens[0])
    ds = create_sft_dataset(str(parquet), data_config(max_length=n - 10), qwen_tokenizer(), None)
    with pytest.raises(ValueError, match=rf"t\.0.*{n} tokens > data.max_length={n - 10}.*--max-tokens"):
        ds[0]
    full = create_sft_dataset(str(parquet), data_config(max_length=n), qwen_tokenizer(), None)[0]
    right = create_sft_dataset(str(parquet), data_config(max_length=n - 10, truncation="right"), qwen_tokenizer(), None)[0]
    assert torch.equal(right["input_ids"], full["input_ids"][: n - 10])
    left = create_sft_dataset(str(parquet), data_config(max_length=n - 10, truncation="left", pad_mode="right"),
                              qwen_tokenizer(), None)[0]
    assert torch.equal(left["input_ids"], full["input_ids"][10:])


def test_plain_verl_multiturn_parquet_is_refused_by_name(tmp_path):
    pd.DataFrame([{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}]) \
        .to_parquet(tmp_path / "plain.parquet")
    with pytest.raises(ValueError, match=r"plain\.parquet.*assistant_loss_mask.*verl-swe rft build"):
        TrajectorySFTDataset(str(tmp_path / "plain.parquet"), qwen_tokenizer(), data_config())
