"""`verl-swe plan` arithmetic on a model whose numbers are public (Qwen2.5-72B-Instruct)."""

import pytest

from verl_swe.trainer.plan import KNOWN_MODELS, Layout, ModelShape, Workload, kv_bytes_per_token, make_plan

Q72 = ModelShape.from_hf_config(KNOWN_MODELS["Qwen/Qwen2.5-72B-Instruct"])
H200x128 = Layout(nnodes=16, gpus_per_node=8, gpu_memory_gb=141, sp=8, rollout_tp=8, gpu_memory_utilization=0.6,
                  param_offload=True, optimizer_offload=True)


def test_model_shape_and_kv_cache():
    assert Q72.params == pytest.approx(72.7e9, rel=0.01)  # the published 72.7B
    # 2 (K and V) x 80 layers x 8 KV heads x 128 head dim x 2 bytes (bf16) = 327,680 bytes per token
    assert kv_bytes_per_token(Q72) == 327_680
    assert kv_bytes_per_token(Q72) * 131_072 / 1e9 == pytest.approx(42.9, abs=0.05)  # ~43 GB per trajectory


def test_rollout_concurrency_is_bounded_by_kv_cache():
    p = make_plan(Q72, H200x128, Workload(131_072, 100, 10, 24, 16_384, 4.0, 131_072))
    rows = dict(p.rows)
    # one TP-8 engine: 8 x 141 GB x 0.6 = 676.8 GB, minus 145.4 GB of bf16 weights = 531 GB -> 12 trajectories
    assert rows["full-length trajectories per engine / in total"] == "12 / 192"
    assert rows["waves for 1000 trajectories"] == "6" and p.ok


def test_layout_errors_name_the_setting():
    p = make_plan(Q72, Layout(16, 8, 141, 6, 8, 0.6, True, True), Workload(131_072, 100, 10, 24, 16_384, 4.0))
    assert any("ulysses_sequence_parallel_size=6 does not divide" in e for e in p.errors)
    assert any("64 attention heads / 8 KV heads" in e for e in p.errors)
    p = make_plan(Q72, Layout(1, 8, 80, 1, 8, 0.9, False, False), Workload(131_072, 100, 10, 24, 16_384, 1.0))
    assert any("exceeds the model's 32768 positions" in e for e in p.errors)
    assert any("training needs" in e and "more than 80 GB" in e for e in p.errors)
    assert any("cannot hold one 131072-token trajectory" in e for e in p.errors)
