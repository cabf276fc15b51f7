"""`verl-swe plan` arithmetic on a model whose numbers are public (Qwen2.5-72B-Instruct), and its LM-head
accounting against the peak of a measured CPU actor step (bench/actor_memory_cpu.py)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from verl_swe.trainer.plan import (KNOWN_MODELS, Head, Layout, ModelShape, Workload, actor_activation_bytes,
                                   kv_bytes_per_token, lm_head_update_bytes, logprob_pass_bytes, make_plan,
                                   tokens_per_rank)

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


# --- the actor's LM head (issue 28): every large tensor verl 0.9.1 holds per micro-batch -----------------------

QWEN_VOCAB = 152_064  # embedding rows of Qwen2.5 (the tokenizer has 151,665)
BENCH = Path(__file__).resolve().parents[2] / "bench" / "actor_memory_cpu.py"


def test_the_lm_head_is_counted_as_verl_computes_it_at_131k():
    # One 131,072-token trajectory's fp32 logits over Qwen's vocabulary, unsplit: 131072 x 152064 x 4 = 79.7 GB
    assert 131_072 * QWEN_VOCAB * 4 / 1e9 == pytest.approx(79.7, abs=0.05)
    # Ulysses sp 8 at ppo_max_token_len_per_gpu 16,384: each rank's head sees 16,384 positions. verl keeps the
    # bf16 logits and, without flash-attn, one fp32 log_softmax output per row (CUDA autocast): 6 bytes a logit
    rank = 16_384 * QWEN_VOCAB
    assert lm_head_update_bytes(Q72, 16_384, Head(), sp=8) == 6 * rank  # 14.9 GB
    assert lm_head_update_bytes(Q72, 16_384, Head(flash_ce=True), sp=8) == 2 * rank  # in-place cross-entropy
    # an entropy bonus (entropy_coeff != 0) adds six softmax-sized tensors in backward: 26 bytes a logit
    assert lm_head_update_bytes(Q72, 16_384, Head(entropy_grad=True), sp=8) == 26 * rank
    # fused kernels never hold the full logits: five fp32 tensors of 512 rows, the head's weight gradient, dhidden
    fused = lm_head_update_bytes(Q72, 16_384, Head(fused_kernels=True), sp=8)
    assert fused == 20 * 512 * QWEN_VOCAB + QWEN_VOCAB * 8192 * 2 + 16_384 * 8192 * 2 and fused < 2 * rank
    # the sparse head (logits at action tokens only) applies without Ulysses only (sparse_lm_head._applies)
    assert Head(sparse=True).rows(16_384, sp=8) == 16_384 and Head(sparse=True).rows(16_384, sp=1) == 16_384 * 0.3


def test_the_no_grad_log_prob_pass_is_counted_and_chunked_entropy_shrinks_it():
    # verl computes entropy in the old-log-prob pass (actor/entropy): logits, softmax, softmax x logits
    e = 32_768 * QWEN_VOCAB
    layer = 32_768 * (4 * Q72.hidden + 6 * Q72.intermediate)
    assert logprob_pass_bytes(Q72, 32_768, Head()) == 10 * e + layer
    # entropy_from_logits_with_chunking: the logits whole, three fp32 tensors of 2,048 rows
    assert logprob_pass_bytes(Q72, 32_768, Head(entropy_chunking=True)) == 2 * e + 12 * 2048 * QWEN_VOCAB + layer


def test_the_update_peak_is_the_head_or_one_recomputed_layer_over_the_checkpointed_inputs():
    t = actor_activation_bytes(Q72, 16_384, Head(), sp=8)
    assert t["checkpointed inputs"] == 16_384 * 8192 * 2 * 81  # 80 layers' inputs and the final norm's, bf16
    assert t["update peak"] == t["checkpointed inputs"] + max(t["LM head"], t["layer recompute"])
    assert tokens_per_rank(16_384, 131_072, 8) == 16_384 and tokens_per_rank(8192, 131_072, 8) == 16_384


def test_without_ulysses_the_head_alone_is_refused_and_fused_kernels_leave_the_checkpointed_inputs():
    one = Layout(1, 8, 141, 1, 8, 0.6, True, True)  # 72B on one node, no Ulysses: 131k positions per head
    w = Workload(131_072, 8, 10, 8, 131_072, 4.0, 131_072)
    full, fused = make_plan(Q72, one, w), make_plan(Q72, one, w, Head(fused_kernels=True))
    assert dict(full.rows)["LM head, update (log_softmax per row)"] == "119.6 GB"  # 6 x 131072 x 152064
    assert dict(fused.rows)["LM head, update (fused kernels)"] == "6.2 GB"
    # still refused: 81 x 131072 x 8192 x 2 bytes of checkpointed inputs; Ulysses is what the recipe needs
    assert dict(fused.rows)["checkpointed layer inputs, 131072 tokens/GPU"] == "173.9 GB"
    assert any("training needs" in e for e in fused.errors)


@pytest.mark.slow
@pytest.mark.parametrize("entropy", ["off", "full"])
def test_the_plan_matches_the_peak_of_a_measured_cpu_actor_step(entropy):
    """bench/actor_memory_cpu.py on one small row: a random Qwen2 (Qwen's 151,665-token vocabulary), verl's
    logprobs_from_logits / entropy_from_logits, forward and backward; the resident-set peak in a fresh process
    against the plan (CPU autocast keeps softmax bf16: softmax_bytes=2)."""
    row = dict(tokens=512, vocab=151_665, hidden=64, layers=1, head="full", entropy=entropy, pass_="update",
               tracker=False)
    out = subprocess.run([sys.executable, str(BENCH), "--row", json.dumps(row)], capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["estimate_gb"] == pytest.approx(r["measured_peak_gb"], rel=0.15), r
    # the count before issue 28 (fp32 logits and their gradient: 8 bytes a logit) misses the entropy path's
    # extra tensors and doubles the bf16 ones
    old = 512 * 151_665 * 8 / 1e9
    assert abs(old - r["measured_peak_gb"]) > 0.15 * r["measured_peak_gb"]
