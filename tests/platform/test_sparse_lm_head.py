"""The LM head on trained positions only (verl_swe/sparse_lm_head.py) gives verl's log-probs, entropies and
gradients wherever a loss reads them, through verl's own FSDPEngineWithLMHead input/output preparation."""

from __future__ import annotations

import types

import pytest
import torch

pytest.importorskip("verl")
from tensordict import TensorDict  # noqa: E402
from transformers import Qwen2Config, Qwen2ForCausalLM  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.utils import torch_functional as verl_F  # noqa: E402
from verl.workers.utils.padding import left_right_2_no_padding, no_padding_2_padding  # noqa: E402

import verl_swe.sparse_lm_head as sparse  # noqa: E402,F401  (patches verl's engine on import)
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead  # noqa: E402

VOCAB = 512


@pytest.fixture(scope="module")
def engine():
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, attn_implementation="eager")
    e = object.__new__(FSDPEngineWithLMHead)  # verl's methods, no FSDP/process group
    e.module = Qwen2ForCausalLM(cfg)
    e.use_ulysses_sp, e.ulysses_sequence_parallel_size, e.pad_to_length = False, 1, False
    e.engine_config = types.SimpleNamespace(entropy_from_logits_with_chunking=False, entropy_checkpointing=False,
                                            entropy_from_logits_chunk_size=2048)
    e.compute_entropy_from_logits = verl_F.entropy_from_logits
    return e


def _flags(td: TensorDict, remove_padding: bool, temperature: float) -> TensorDict:
    tu.assign_non_tensor_data(td, "use_remove_padding", remove_padding)
    tu.assign_non_tensor_data(td, "calculate_entropy", True)
    tu.assign_non_tensor_data(td, "temperature", temperature)
    return td


def rl_batch(remove_padding: bool) -> TensorDict:
    """Two left-padded prompts and right-padded responses whose masks have holes (observation tokens)."""
    g = torch.Generator().manual_seed(1)
    prompt_len, response_len = 6, 9
    prompts = torch.randint(1, VOCAB, (2, prompt_len), generator=g)
    responses = torch.randint(1, VOCAB, (2, response_len), generator=g)
    attention = torch.ones(2, prompt_len + response_len, dtype=torch.long)
    attention[0, :2] = 0          # prompt 0 is 4 tokens
    attention[1, -3:] = 0         # response 1 is 6 tokens
    response_mask = torch.tensor([[1, 1, 0, 0, 0, 1, 1, 1, 0], [1, 0, 0, 1, 1, 1, 0, 0, 0]])
    position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
    td = TensorDict({"input_ids": torch.cat([prompts, responses], 1), "attention_mask": attention,
                     "response_mask": response_mask, "position_ids": position_ids, "prompts": prompts,
                     "responses": responses}, batch_size=2)
    return _flags(left_right_2_no_padding(td), remove_padding, temperature=0.7)


def rl_v1_batch(remove_padding: bool) -> TensorDict:
    """The v1 trainer's layout (verl/trainer/ppo/v1/agent_loop_tq.py): one row per TransferQueue sample, every
    field nested, loss_mask = response_mask over the response only."""
    g = torch.Generator().manual_seed(3)
    prompts = [torch.randint(1, VOCAB, (n,), generator=g) for n in (4, 7)]
    responses = [torch.randint(1, VOCAB, (n,), generator=g) for n in (9, 5)]
    masks = [torch.tensor([1, 1, 0, 0, 0, 1, 1, 1, 1]), torch.tensor([0, 1, 1, 0, 1])]
    nested = lambda xs: torch.nested.as_nested_tensor(xs, layout=torch.jagged)  # noqa: E731
    ids = [torch.cat([p, r]) for p, r in zip(prompts, responses)]
    td = TensorDict({"input_ids": nested(ids), "position_ids": nested([torch.arange(len(i)) for i in ids]),
                     "prompts": nested(prompts), "responses": nested(responses), "loss_mask": nested(masks),
                     "response_mask": nested(masks)}, batch_size=2)
    return _flags(td, remove_padding, temperature=0.7)


def sft_batch(remove_padding: bool) -> TensorDict:
    g = torch.Generator().manual_seed(2)
    lengths, masks = [7, 11], [[0, 0, 0, 1, 1, 0, 1], [0, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1]]
    ids = [torch.randint(1, VOCAB, (n,), generator=g) for n in lengths]
    nested = lambda xs: torch.nested.as_nested_tensor(xs, layout=torch.jagged)  # noqa: E731
    td = TensorDict({"input_ids": nested(ids), "position_ids": nested([torch.arange(n) for n in lengths]),
                     "loss_mask": nested([torch.tensor(m) for m in masks])}, batch_size=2)
    return _flags(td, remove_padding, temperature=1.0)


def forward(engine, batch: TensorDict) -> dict:
    engine.module.zero_grad()
    inputs, args = engine.prepare_model_inputs(batch)
    out = engine.prepare_model_outputs(engine.module(**inputs, use_cache=False), args, batch, None)
    return {"kept": sparse._KEY in args, "log_probs": out["log_probs"].values(),
            "entropy": out["entropy"].values()}


def used_positions(batch: TensorDict) -> torch.Tensor:
    """Where the losses read log-probs: sft_loss rolls loss_mask left by one; ppo_loss slices responses."""
    mask = batch["loss_mask"]
    if mask.is_nested and "prompts" not in batch:
        return torch.roll(mask.values(), -1).bool()
    total = batch["input_ids"].values().shape[0]
    used = torch.zeros(total, dtype=torch.bool)
    by_response = no_padding_2_padding(torch.arange(total), batch)
    if mask.is_nested:
        mask = torch.nested.to_padded_tensor(mask, 0, output_size=tuple(by_response.shape))
    used[by_response[mask.bool()]] = True
    return used


@pytest.mark.parametrize("make", [rl_batch, rl_v1_batch, sft_batch], ids=["rl", "rl-v1", "sft"])
@pytest.mark.parametrize("remove_padding", [False, True], ids=["padded", "packed"])
def test_matches_the_full_head_where_a_loss_reads_it(engine, make, remove_padding, monkeypatch):
    batch = make(remove_padding)
    used = used_positions(batch)
    assert 0 < used.sum() < used.numel()

    results = {}
    for on in ("1", "0"):
        monkeypatch.setenv("VERL_SWE_SPARSE_LM_HEAD", on)
        r = forward(engine, batch)
        loss = -(r["log_probs"] * used).sum() - 0.1 * (r["entropy"] * used).sum()
        loss.backward()
        r["grads"] = {n: p.grad.clone() for n, p in engine.module.named_parameters() if p.grad is not None}
        results[on] = r
    sparse_, full = results["1"], results["0"]
    assert sparse_["kept"] and not full["kept"]
    torch.testing.assert_close(sparse_["log_probs"][used], full["log_probs"][used])
    torch.testing.assert_close(sparse_["entropy"][used], full["entropy"][used])
    assert torch.all(sparse_["log_probs"][~used] == 0)  # never read; the head did not run there
    assert "_verl_swe_head_index" not in engine.__dict__  # consumed by the forward that asked for it
    assert sparse_["grads"].keys() == full["grads"].keys() and full["grads"]
    for name, grad in full["grads"].items():
        torch.testing.assert_close(sparse_["grads"][name], grad, msg=name)


def test_an_all_masked_micro_batch_still_backpropagates(engine, monkeypatch):
    """verl pads a batch with zero-mask rows: the loss is 0, and backward must still run."""
    monkeypatch.setenv("VERL_SWE_SPARSE_LM_HEAD", "1")
    batch = rl_batch(False)
    batch["loss_mask"] = torch.zeros_like(batch["loss_mask"])
    r = forward(engine, batch)
    (r["log_probs"].sum() * 0).backward()
    assert r["kept"]


def test_falls_back_to_verl_for_sequence_parallel(engine, monkeypatch):
    monkeypatch.setenv("VERL_SWE_SPARSE_LM_HEAD", "1")
    monkeypatch.setattr(engine, "use_ulysses_sp", True)
    assert not sparse._applies(engine, rl_batch(False))
