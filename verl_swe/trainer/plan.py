"""`verl-swe plan`: will this run fit, before any GPU is touched?

Checks divisibility (mini-batches against data parallelism, attention heads against Ulysses sequence
parallelism), the context against the model and the rollout engine, and estimates per-GPU memory
for training (parameters, gradients, optimizer, activations at the configured context, logits) and
for rollout (KV cache bytes per token, full-length trajectories per engine, waves per iteration).
Arithmetic only: estimates, stated as such.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from verl_swe.trainer.model_cards import MODELS, hf_config

GB = 1e9


@dataclass(frozen=True)
class ModelShape:
    params: float  # parameter count
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    max_positions: int

    @classmethod
    def from_hf_config(cls, c: dict) -> "ModelShape":
        h, L, v, inter = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], c["intermediate_size"]
        heads, kv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
        hd = c.get("head_dim") or h // heads
        per_layer = h * hd * (heads + 2 * kv) + heads * hd * h + 3 * h * inter + 2 * h
        tied = c.get("tie_word_embeddings", False)
        params = L * per_layer + v * h * (1 if tied else 2) + h
        return cls(params, L, h, heads, kv, hd, inter, v, c.get("max_position_embeddings", 32768))


# Published configs (config.json of the Hugging Face repos, bundled in model_cards/), so a plan needs no download.
KNOWN_MODELS = {name: hf_config(name) for name in MODELS}


@dataclass(frozen=True)
class Layout:
    nnodes: int
    gpus_per_node: int
    gpu_memory_gb: float
    sp: int  # Ulysses sequence parallel size (training)
    rollout_tp: int
    gpu_memory_utilization: float  # the rollout engine's share
    param_offload: bool
    optimizer_offload: bool
    model_dtype_bytes: int = 4  # verl keeps fp32 master weights by default (fsdp_config.model_dtype)

    @property
    def world(self) -> int:
        return self.nnodes * self.gpus_per_node


@dataclass(frozen=True)
class Workload:
    context: int  # prompt + response tokens
    prompts_per_iteration: int
    n: int  # rollouts per prompt (G)
    mini_batch_prompts: int  # ppo_mini_batch_size (prompts)
    max_token_len_per_gpu: int  # dynamic batch size budget (ppo_max_token_len_per_gpu)
    rope_scaling: float = 1.0
    rollout_max_model_len: int | None = None


@dataclass
class Plan:
    rows: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    training_bytes: dict[str, float] = field(default_factory=dict)  # the training rows, unrounded

    @property
    def ok(self) -> bool:
        return not self.errors


def kv_bytes_per_token(m: ModelShape, dtype_bytes: int = 2) -> int:
    """K and V, every layer, every KV head: 2 * layers * kv_heads * head_dim * bytes."""
    return 2 * m.layers * m.kv_heads * m.head_dim * dtype_bytes


def make_plan(m: ModelShape, lay: Layout, w: Workload) -> Plan:
    p = Plan()
    dp = lay.world // lay.sp
    if lay.world % lay.sp:
        p.errors.append(f"ulysses_sequence_parallel_size={lay.sp} does not divide the {lay.world} GPUs")
    if m.heads % lay.sp or (m.kv_heads % lay.sp and lay.sp % m.kv_heads):
        p.errors.append(f"{m.heads} attention heads / {m.kv_heads} KV heads cannot be split over "
                        f"ulysses_sequence_parallel_size={lay.sp}")
    mini = w.mini_batch_prompts * w.n
    if mini % dp:
        p.errors.append(f"ppo_mini_batch_size x n = {mini} trajectories is not divisible by data parallelism {dp} "
                        f"(= {lay.world} GPUs / sp {lay.sp})")
    if lay.world % lay.rollout_tp:
        p.errors.append(f"rollout tensor_model_parallel_size={lay.rollout_tp} does not divide the {lay.world} GPUs")
    if m.kv_heads % lay.rollout_tp and lay.rollout_tp % m.kv_heads:
        p.errors.append(f"{m.kv_heads} KV heads cannot be split over rollout tensor parallelism {lay.rollout_tp}")
    longest = int(m.max_positions * w.rope_scaling)
    if w.context > longest:
        p.errors.append(f"context {w.context} exceeds the model's {m.max_positions} positions x rope scaling "
                        f"{w.rope_scaling:g} = {longest} (YaRN factor 4 gives 131,072 for Qwen2.5)")
    if w.rollout_max_model_len is not None and w.context > w.rollout_max_model_len:
        p.errors.append(f"context {w.context} exceeds rollout.max_model_len={w.rollout_max_model_len}")
    if w.max_token_len_per_gpu * lay.sp < w.context:
        p.errors.append(f"ppo_max_token_len_per_gpu={w.max_token_len_per_gpu} x sp {lay.sp} cannot hold one "
                        f"{w.context}-token trajectory")

    # Training side, per GPU (FSDP shards parameters, gradients and optimizer over all GPUs).
    shard = lay.world
    params_b = 0 if lay.param_offload else m.params * lay.model_dtype_bytes / shard
    grads_b = m.params * lay.model_dtype_bytes / shard
    optim_b = 0 if lay.optimizer_offload else 2 * m.params * 4 / shard  # Adam moments, fp32
    tokens = min(w.max_token_len_per_gpu, w.context) if lay.sp == 1 else math.ceil(w.context / lay.sp)
    # Gradient checkpointing keeps each layer's input (bf16); one layer is recomputed at a time.
    ckpt_b = tokens * m.hidden * 2 * m.layers
    layer_b = tokens * (12 * m.hidden + 4 * m.intermediate) * 2
    allgather_b = 2 * (m.params / m.layers) * 2  # one layer's full bf16 weights, gathered (and prefetch)
    logits_b = tokens * m.vocab * 4 * 2  # fp32 logits and their gradient
    train_total = params_b + grads_b + optim_b + ckpt_b + layer_b + allgather_b + logits_b
    for name, b in [("params (fp32 master, sharded)", params_b), ("gradients (sharded)", grads_b),
                    ("optimizer (Adam, sharded)", optim_b), (f"activations, {tokens} tokens/GPU (checkpointed)",
                                                            ckpt_b + layer_b),
                    ("gathered layer weights", allgather_b), ("logits + grad (fp32)", logits_b),
                    ("training total per GPU", train_total)]:
        p.rows.append((name, f"{b / GB:.1f} GB"))
        p.training_bytes[name] = b
    if train_total > lay.gpu_memory_gb * GB * 0.95:
        p.errors.append(f"training needs ~{train_total / GB:.0f} GB per GPU, more than {lay.gpu_memory_gb:g} GB: "
                        "raise ulysses sp, offload parameters/optimizer, or lower ppo_max_token_len_per_gpu")

    # Rollout side: KV cache decides how many full-length trajectories run at once.
    kv_tok = kv_bytes_per_token(m)
    engines = lay.world // lay.rollout_tp
    engine_mem = lay.gpu_memory_gb * GB * lay.gpu_memory_utilization * lay.rollout_tp
    kv_room = engine_mem - m.params * 2  # bf16 weights of one engine
    per_traj = kv_tok * w.context
    per_engine = int(kv_room // per_traj) if kv_room > 0 else 0
    concurrency = per_engine * engines
    trajectories = w.prompts_per_iteration * w.n
    waves = math.ceil(trajectories / concurrency) if concurrency else float("inf")
    p.rows += [("KV cache per token", f"{kv_tok / 1e6:.3f} MB"),
               (f"KV cache per {w.context}-token trajectory", f"{per_traj / GB:.1f} GB"),
               (f"rollout engines (TP {lay.rollout_tp})", str(engines)),
               ("KV room per engine", f"{max(kv_room, 0) / GB:.0f} GB"),
               ("full-length trajectories per engine / in total", f"{per_engine} / {concurrency}"),
               (f"waves for {trajectories} trajectories", str(waves))]
    if per_engine == 0:
        p.errors.append(f"a rollout engine (TP {lay.rollout_tp}, gpu_memory_utilization {lay.gpu_memory_utilization}) "
                        f"cannot hold the weights and one {w.context}-token trajectory's KV cache")
    return p
