"""`verl-swe plan`: will this run fit, before any GPU is touched?

Checks divisibility (mini-batches against data parallelism, attention heads against Ulysses sequence
parallelism), the context against the model and the rollout engine, and estimates per-GPU memory
for training and for rollout (KV cache bytes per token, full-length trajectories per engine, waves per
iteration). Arithmetic only: estimates, stated as such.

Training, per GPU: the FSDP shards (parameters, gradients, Adam) and one gathered layer; per micro-batch
(verl's dynamic batch size packs ppo_max_token_len_per_gpu x sp tokens, Ulysses gives each rank its slice)
the update pass holds every layer's checkpointed input, then peaks at the larger of one recomputed layer and
the LM head path as verl 0.9.1's FSDP engine computes it (`Head`: logits, log_softmax, entropy, fused kernels,
the sparse head); the no-grad old-log-prob pass, where verl computes entropy, is planned beside it.
bench/actor_memory_cpu.py measures the same micro-batch on a CPU and checks these terms (bench/README.md).
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
    logprob_max_token_len_per_gpu: int | None = None  # rollout.log_prob_max_token_len_per_gpu (default: the actor's)


@dataclass
class Plan:
    rows: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    training_bytes: dict[str, float] = field(default_factory=dict)  # the training rows, unrounded

    @property
    def ok(self) -> bool:
        return not self.errors


# Default share of a micro-batch's positions whose log-prob the loss reads (action tokens), for the sparse head.
# The paper gives none; verl_swe/sparse_lm_head.py measured 15-30% on CPU episodes (a long SWE context is
# mostly observations, so less): 0.3 is the conservative end.
ACTION_FRACTION = 0.3


@dataclass(frozen=True)
class Head:
    """How verl 0.9.1 computes the actor's LM head per micro-batch (FSDPEngineWithLMHead.prepare_model_outputs,
    use_remove_padding) and which of its memory savers are on."""
    fused_kernels: bool = False      # model.use_fused_kernels: FusedLinearForPPO, 512 rows at a time, no full logits
    entropy_grad: bool = False       # actor.entropy_coeff != 0 or actor.calculate_entropy (v1 trainer _update_actor)
    entropy_checkpointing: bool = False  # actor.entropy_checkpointing
    entropy_chunking: bool = False   # actor.entropy_from_logits_with_chunking (helps the no-grad pass only)
    entropy_chunk: int = 2048        # actor.entropy_from_logits_chunk_size
    flash_ce: bool = False           # flash-attn's in-place cross-entropy (logprobs_from_logits uses it if installed)
    sparse: bool = False             # verl_swe/sparse_lm_head.py (VERL_SWE_SPARSE_LM_HEAD, on by default)
    action_fraction: float = ACTION_FRACTION
    # Bytes of the softmax family's outputs: CUDA autocast runs softmax, log_softmax and logsumexp in fp32 (its
    # fp32 op list); CPU autocast keeps them bf16 (2), which the CPU bench uses.
    softmax_bytes: int = 4
    logits_bytes: int = 2            # the head's matmul output: bf16 (FSDP param_dtype; HF Qwen2 does not upcast)
    fused_chunk: int = 512           # FusedLinearForPPO's chunk_size

    def sparse_applies(self, sp: int) -> bool:
        # as sparse_lm_head._applies: verl's own path under Ulysses or fused kernels
        return self.sparse and sp == 1 and not self.fused_kernels

    def rows(self, tokens: int, sp: int) -> float:
        return tokens * self.action_fraction if self.sparse_applies(sp) else tokens

    def describe(self, sp: int) -> str:
        if self.fused_kernels:
            return "fused kernels"
        parts = ["flash-attn cross-entropy" if self.flash_ce else "log_softmax per row"]
        if self.sparse_applies(sp):
            parts.append(f"sparse head at {self.action_fraction:g} of positions")
        if self.entropy_grad:
            parts.append("entropy with grad")
        return ", ".join(parts)


def lm_head_update_bytes(m: ModelShape, tokens: int, head: Head, sp: int = 1) -> float:
    """Peak bytes of the LM head path in the update pass (with grad), per micro-batch and rank. Under Ulysses
    the head runs on the rank's slice of the sequence (verl gathers log-probs afterwards, not logits)."""
    a, s, v = head.logits_bytes, head.softmax_bytes, m.vocab
    if head.fused_kernels:
        # _fused_linear_for_ppo_bwd, per chunk, at `dlogits += dlog_probs * (one_hot - probs)`: the fp32 logits
        # (the bf16 matmul output is gone by then), probs, one_hot, (one_hot - probs) and the product, all fp32
        # (explicit .to(float32)); plus dvocab_weights and dhidden, allocated whole by the backward.
        return 20 * head.fused_chunk * v + v * m.hidden * a + tokens * m.hidden * a
    e = head.rows(tokens, sp) * v  # logit elements
    if head.entropy_grad:
        # entropy_from_logits with autograd: pd (softmax), the log_softmax outputs of the log-prob branch, and
        # in backward grad_pd = g * logits, the mul's grad of logits, softmax's backward (temporary and result)
        # and logsumexp's exp: six softmax-sized tensors beside the logits. entropy_checkpointing frees pd after
        # the forward but recomputes it in backward, where the peak is: the same peak (bench/README.md).
        return (a + 6 * s) * e
    if head.flash_ce:
        return a * e  # flash-attn's cross_entropy_loss keeps the logits and writes their grad in place
    # logprobs_from_logits_v2 (bf16 logits): one log_softmax per row, each output saved for backward
    return (a + s) * e


def logprob_pass_bytes(m: ModelShape, tokens: int, head: Head, sp: int = 1) -> float:
    """Peak of the no-grad old-log-prob pass (verl computes entropy there for actor/entropy): the LM head
    path plus one layer's transient activations."""
    a, s, v = head.logits_bytes, head.softmax_bytes, m.vocab
    layer = tokens * (4 * m.hidden + 6 * m.intermediate)  # a layer's widest moment, nothing saved
    if head.fused_kernels:  # per chunk: logits (bf16, fp32), probs, probs * logits, log_softmax
        return (a + 16) * head.fused_chunk * v + layer
    e = head.rows(tokens, sp) * v
    if head.entropy_chunking:  # logits whole, then per chunk an fp32 copy, softmax and the product (always fp32)
        return a * e + 12 * min(head.entropy_chunk, tokens) * v + layer
    return (a + 2 * s) * e + layer  # logits, pd = softmax(logits), pd * logits


def layer_recompute_bytes(m: ModelShape, tokens: int, dtype_bytes: int = 2) -> float:
    """One Qwen2 decoder layer's saved tensors when gradient checkpointing recomputes it in backward, per token:
    two RMSNorms (fp32 upcast of the input 4h, normalized bf16 2h, output 2h: 8h each), q with RoPE (q, rotate_half(q),
    q_embed: 6h), k and v likewise (6kv + 2kv), the attention output and o_proj's input (4h), the MLP
    (gate, up, silu(gate), their product: 8I)."""
    kv = m.kv_heads * m.head_dim
    return tokens * (28 * m.hidden + 8 * kv + 8 * m.intermediate) * dtype_bytes / 2


def actor_activation_bytes(m: ModelShape, tokens: int, head: Head, sp: int = 1) -> dict[str, float]:
    """The update pass per micro-batch and rank, with gradient checkpointing: every layer's input stays, then
    the peak is the LM head (forward end and its backward) or one layer's recompute, whichever is larger."""
    ckpt = tokens * m.hidden * 2 * (m.layers + 1)  # the layers' inputs and the final norm's (bf16)
    lm = lm_head_update_bytes(m, tokens, head, sp)
    layer = layer_recompute_bytes(m, tokens)
    return {"checkpointed inputs": ckpt, "LM head": lm, "layer recompute": layer, "update peak": ckpt + max(lm, layer)}


def tokens_per_rank(max_token_len_per_gpu: int, context: int, sp: int) -> int:
    """verl's dynamic batch size packs up to ppo_max_token_len_per_gpu x sp tokens per micro-batch
    (prepare_micro_batches) and Ulysses splits the packed sequence over the sp ranks: the budget per rank,
    or one trajectory split when a single one is longer (the plan refuses that layout)."""
    return max(max_token_len_per_gpu, math.ceil(context / sp))


def kv_bytes_per_token(m: ModelShape, dtype_bytes: int = 2) -> int:
    """K and V, every layer, every KV head: 2 * layers * kv_heads * head_dim * bytes."""
    return 2 * m.layers * m.kv_heads * m.head_dim * dtype_bytes


def make_plan(m: ModelShape, lay: Layout, w: Workload, head: Head | None = None) -> Plan:
    head = head or Head()
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
    allgather_b = 2 * (m.params / m.layers) * 2  # one layer's full bf16 weights, gathered (and prefetch)
    tokens = tokens_per_rank(w.max_token_len_per_gpu, w.context, lay.sp)
    act = actor_activation_bytes(m, tokens, head, lay.sp)
    update_b = params_b + grads_b + optim_b + allgather_b + act["update peak"]
    # the old-log-prob pass (no grad, entropy on for verl's actor/entropy metric), its own token budget
    lp_tokens = tokens_per_rank(w.logprob_max_token_len_per_gpu or w.max_token_len_per_gpu, w.context, lay.sp)
    logprob_b = params_b + optim_b + allgather_b + logprob_pass_bytes(m, lp_tokens, head, lay.sp)  # grads: None
    train_total = max(update_b, logprob_b)
    rows = [("params (fp32 master, sharded)", params_b), ("gradients (sharded)", grads_b),
            ("optimizer (Adam, sharded)", optim_b), ("gathered layer weights", allgather_b),
            (f"checkpointed layer inputs, {tokens} tokens/GPU", act["checkpointed inputs"]),
            ("one layer recomputed (backward)", act["layer recompute"]),
            (f"LM head, update ({head.describe(lay.sp)})", act["LM head"]),
            ("update pass total per GPU", update_b),
            (f"old-log-prob pass per GPU ({lp_tokens} tokens, no grad, entropy)", logprob_b),
            ("training total per GPU", train_total)]
    for name, b in rows:
        p.rows.append((name, f"{b / GB:.1f} GB"))
        p.training_bytes[name] = b
    if train_total > lay.gpu_memory_gb * GB * 0.95:
        p.errors.append(f"training needs ~{train_total / GB:.0f} GB per GPU, more than {lay.gpu_memory_gb:g} GB: "
                        "raise ulysses sp, offload parameters/optimizer, lower ppo_max_token_len_per_gpu, or "
                        "shrink the LM head (model.use_fused_kernels, entropy off or chunked)")

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
