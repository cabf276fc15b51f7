"""The actor's update on one GPU at the recipes' context lengths: forward + backward of a small random Qwen2 with
the `swe_dapo` loss (P1 Eq. 8), gradient checkpointing on, padding removed (one packed sequence per micro-batch,
as verl's dynamic batch size packs one long trajectory), beside `verl-swe plan`'s estimate for the same shape.

Made for a bare machine: one H200, Python 3.12 with torch and transformers, no network, no vLLM, no Ray, no
verl: it imports only torch, transformers and two files of this repository that need nothing else
(verl_swe/algo/loss.py, verl_swe/trainer/plan.py). Run from the repository root:

    python3 bench/actor_step_gpu.py --out bench/actor-step-gpu-results.json   # 32k, 65k, the longest that fits
    python3 bench/actor_step_gpu.py --device cpu --tokens 512,1024 --hidden 64 --layers 2 --vocab 4096 --out x.json

Per context: peak memory (torch.cuda.max_memory_allocated) and tokens/s of an update (forward, backward, grad
clip, AdamW step; median of --iters after --warmup), and plan.py's per-GPU training estimate for the model and
the context (its layout: 1 GPU, no offload, no sequence parallelism, fp32 master weights and Adam moments). Attention is PyTorch SDPA (its own flash
kernel on the GPU; no flash-attn package on that machine). `--head masked` computes the LM head on the
action tokens only (verl_swe/sparse_lm_head.py's idea); `full` (default) on every token, as verl does: bf16
logits, then verl's logprobs_from_logits_v2 (one log_softmax per row; the path verl takes without flash-attn),
the logits freed before backward as verl's engine frees its model output.

Before each row the plan's verdict for that row is printed (`plan:` estimate, fits or not, on --gpu-gb);
a row the plan says does not fit is recorded with the verdict and not run (`--force` runs it anyway). The
default rows are 32k, 65k and the longest context up to 131k that fits by the plan. The plan assumes FSDP's
bf16 compute copy; this bench keeps fp32 weights under autocast, so its residual stream (the checkpointed
layer inputs) is fp32: twice the plan's small checkpointed-inputs term.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # verl_swe without installing it

import torch  # noqa: E402

from verl_swe.algo.loss import dapo_token_loss  # noqa: E402 - torch only
from verl_swe.trainer.plan import GB, Head, Layout, ModelShape, Workload, make_plan  # noqa: E402 - stdlib only

MASKED_FRACTION = 0.9  # step(): 10% prompt, 90% actions


def log_probs_v2(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """verl.utils.torch_functional.logprobs_from_logits_v2 for bf16 logits (verl is not on the bare machine):
    one log_softmax per row, so only the rows' outputs (saved for backward) and the logits are held."""
    try:
        from verl.utils.torch_functional import logprobs_from_logits_v2
    except ImportError:
        return torch.stack([torch.log_softmax(row, -1).gather(-1, label.view(1)).squeeze(-1)
                            for row, label in zip(logits, labels, strict=True)])
    return logprobs_from_logits_v2(logits, labels)


def build(args, device):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate or 4 * args.hidden,
                         num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                         max_position_embeddings=max(args.tokens), rope_theta=1e6, tie_word_embeddings=False,
                         attn_implementation="sdpa", use_cache=False)
    model = Qwen2ForCausalLM(config).to(device)  # fp32 master weights; bf16 compute under autocast (as verl's FSDP)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    return model, config


def step(model, optimizer, tokens: int, head: str, device) -> dict:
    """One update on Eq. 8 for a packed sequence (10% prompt, mask 0; 90% actions): forward, backward, grad
    clip 1.0 and an AdamW step, as the actor's mini-batch step (P1 App. C's optimizer)."""
    g = torch.Generator(device="cpu").manual_seed(tokens)
    ids = torch.randint(0, model.config.vocab_size, (1, tokens), generator=g).to(device)
    position_ids = torch.arange(tokens, device=device).unsqueeze(0)
    mask = torch.zeros(tokens, dtype=torch.bool, device=device)
    mask[tokens // 10:] = True
    on = mask[1:]
    logp = head_log_probs(model, ids, position_ids, on, head, device)
    response_mask = torch.ones_like(logp) if head == "masked" else on.to(logp.dtype)
    old = (logp.detach() + 0.01 * torch.randn_like(logp)).detach()
    advantages = torch.where(torch.rand_like(logp) > 0.5, 1.0, -1.0)
    loss, _ = dapo_token_loss(old, logp, advantages, response_mask, eps_low=0.2, eps_high=0.28)
    loss.backward()
    grad = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return {"loss": float(loss.detach()), "grad_norm": grad}


def head_log_probs(model, ids, position_ids, on, head: str, device) -> torch.Tensor:
    """The log-prob of token t+1 from position t (on action tokens only for `masked`); the logits are local
    here, so they are freed when this returns, before backward."""
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
        hidden = model.model(input_ids=ids, position_ids=position_ids).last_hidden_state[0]
        targets = ids[0, 1:]
        h = hidden[:-1][on] if head == "masked" else hidden[:-1]
        logits = model.lm_head(h)  # bf16, as verl's FSDP engine gets them (no upcast)
        return log_probs_v2(logits, targets[on] if head == "masked" else targets).float()


def sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def measure(model, optimizer, tokens: int, args, device) -> dict:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    times, last = [], {}
    try:
        for i in range(args.warmup + args.iters):
            sync(device)
            t0 = time.perf_counter()
            last = step(model, optimizer, tokens, args.head, device)
            sync(device)
            if i >= args.warmup:
                times.append(time.perf_counter() - t0)
    except torch.OutOfMemoryError as e:
        return {"tokens": tokens, "error": f"OutOfMemoryError: {str(e)[:300]}"}
    out = {"tokens": tokens, "seconds_median": statistics.median(times), "tokens_per_s": tokens / statistics.median(times),
           **last}
    if device.type == "cuda":
        out["peak_memory_gb"] = torch.cuda.max_memory_allocated() / GB
    return out


def plan_estimate(config, tokens: int, gpu_gb: float, head: str = "full") -> dict:
    """plan.py's per-GPU training memory for this model and context on one GPU (no offload, no sequence
    parallelism), the LM head as this bench computes it, and its verdict."""
    shape = ModelShape.from_hf_config(config.to_dict())
    layout = Layout(nnodes=1, gpus_per_node=1, gpu_memory_gb=gpu_gb, sp=1, rollout_tp=1, gpu_memory_utilization=0.5,
                    param_offload=False, optimizer_offload=False)
    plan = make_plan(shape, layout, Workload(context=tokens, prompts_per_iteration=1, n=1, mini_batch_prompts=1,
                                             max_token_len_per_gpu=tokens),
                     Head(sparse=head == "masked", action_fraction=MASKED_FRACTION))
    # this bench runs the update pass only (no old-log-prob pass): its total is the one to fit
    update = plan.training_bytes["update pass total per GPU"]
    fits = update <= 0.95 * gpu_gb * GB  # plan.py's margin
    return {"params": shape.params, "fits": fits, "verdict": "fits" if fits else f"does not fit (> 95% of {gpu_gb:g} GB)",
            **{k: round(b / GB, 6) for k, b in plan.training_bytes.items()}}


def default_tokens(config, args) -> list[int]:
    """32k, 65k, and the longest multiple of 8,192 up to 131,072 that fits by the plan."""
    fitting = [t for t in range(8192, 131072 + 1, 8192) if plan_estimate(config, t, args.gpu_gb, args.head)["fits"]]
    return sorted({32768, 65536, *(fitting[-1:])})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("actor-step-gpu-results.json"))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tokens", type=lambda s: [int(x) for x in s.split(",")], default=None,
                        help="contexts (default: 32k, 65k and the longest up to 131k that fits by the plan)")
    parser.add_argument("--force", action="store_true", help="also run rows the plan says do not fit")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--intermediate", type=int, default=0, help="default 4 x hidden")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--kv-heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=152064, help="Qwen2.5's: the LM head dominates at long context")
    parser.add_argument("--head", choices=["full", "masked"], default="full")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--gpu-gb", type=float, default=141.0, help="for the plan's fit check (H200)")
    args = parser.parse_args()
    device = torch.device(args.device)
    chosen = args.tokens
    args.tokens = chosen or [131072]  # build() sizes the positions; without --tokens the plan picks the rows
    model, config = build(args, device)
    args.tokens = chosen or default_tokens(config, args)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
    results = []
    for tokens in args.tokens:
        plan = plan_estimate(config, tokens, args.gpu_gb, args.head)
        print(f"plan: {tokens} tokens, {args.head} head: update pass {plan['update pass total per GPU']:.1f} GB per GPU "
              f"on {args.gpu_gb:g} GB: {plan['verdict']}", flush=True)
        if not plan["fits"] and not args.force:
            results.append({"tokens": tokens, "skipped": "the plan says it does not fit", "plan": plan})
            continue
        r = {**measure(model, optimizer, tokens, args, device), "plan": plan}
        results.append(r)
        print(json.dumps({k: v for k, v in r.items() if k != "plan"}), flush=True)
    accelerator = torch.cuda.get_device_name(device) if device.type == "cuda" else "none (CPU)"
    out = {"machine": {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "platform": platform.platform(),
                       "cpus": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
                       "accelerator": accelerator, "device": str(device)},
           "model": {"hidden": args.hidden, "intermediate": config.intermediate_size, "layers": args.layers,
                     "heads": args.heads, "kv_heads": args.kv_heads, "vocab": args.vocab, "head": args.head,
                     "gradient_checkpointing": True, "attention": "sdpa", "compute_dtype": "bfloat16 autocast"},
           "results": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
