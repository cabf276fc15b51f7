"""The actor's peak memory per micro-batch, measured on a CPU, beside `verl-swe plan`'s estimate for the same shape.

Each row runs in a fresh Python process: a random Qwen2ForCausalLM (transformers; bf16 weights, as FSDP's
`param_dtype` computes; gradient checkpointing on, non-reentrant, as verl enables it) does one forward and
backward of a packed sequence the way verl 0.9.1's FSDP engine does it (`FSDPEngineWithLMHead.prepare_model_outputs`
with use_remove_padding): full logits, then verl's own `logprobs_from_logits` (no flash-attn here: its
`logprobs_from_logits_v2`), `entropy_from_logits[_with_chunking]` when entropy is computed, or verl's fused
`FusedLinearForPPO` (use_fused_kernels, torch backend); the sparse head keeps the hidden states of action
tokens only (verl_swe/sparse_lm_head.py). The loss is Eq. 8's token mean (verl_swe/algo/loss.py). `pass:
logprob` is the no-grad old-log-prob pass (verl computes entropy there for its actor/entropy metric).

The peak is the resident-set high-water mark (VmHWM) after /proc/self/clear_refs reset it, minus the resident
set just before the step; glibc is told to hand every block of 16 KiB or more back to the kernel on free
(MALLOC_MMAP_THRESHOLD_), so the high-water mark follows live tensors. A second run of the same step under
torch's MemTracker (torch.distributed._tools.mem_tracker: every tensor's storage, by category, the counter
torch.cuda.max_memory_allocated keeps on a GPU) gives the tensor-level peak beside it.

    .venv/bin/python bench/actor_memory_cpu.py                  # every row -> bench/actor-memory-cpu-results.json
    .venv/bin/python bench/actor_memory_cpu.py --rows 0,3       # some rows, printed only (--append: into the file)
    .venv/bin/python bench/actor_memory_cpu.py --reestimate     # the plan's column again from the recorded rows
    .venv/bin/python bench/actor_memory_cpu.py --table          # the file as bench/README.md's table
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GB = 1e9
# 16 KiB: a 32k-vocabulary bf16 row (64 KB) is mmapped too, so its free returns the pages (else the heap keeps
# them and the high-water mark counts them again under the gradients allocated later)
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "16384", "MALLOC_TRIM_THRESHOLD_": "16384", "OMP_NUM_THREADS": "2"}

# (tokens, vocab, hidden, layers, head path, entropy in the update, pass). Vocabularies: Qwen2.5's tokenizer
# (151,665 tokens; the embedding has 152,064 rows) and a smaller one; hidden sizes where activations or the
# LM head dominate. Sizes fit a 2-core, 23 GB machine in a few minutes.
ROWS = [
    dict(tokens=4096, vocab=151_665, hidden=256, layers=2, head="full", entropy="off", pass_="update"),
    dict(tokens=8192, vocab=151_665, hidden=256, layers=2, head="full", entropy="off", pass_="update"),
    dict(tokens=4096, vocab=32_000, hidden=1024, layers=4, head="full", entropy="off", pass_="update"),
    dict(tokens=4096, vocab=151_665, hidden=256, layers=2, head="full", entropy="full", pass_="update"),
    dict(tokens=4096, vocab=151_665, hidden=256, layers=2, head="full", entropy="checkpointed", pass_="update"),
    dict(tokens=8192, vocab=151_665, hidden=256, layers=2, head="fused", entropy="off", pass_="update"),
    dict(tokens=8192, vocab=151_665, hidden=256, layers=2, head="sparse", entropy="off", pass_="update",
         action_fraction=0.3),
    dict(tokens=4096, vocab=151_665, hidden=256, layers=2, head="full", entropy="full", pass_="logprob"),
    dict(tokens=4096, vocab=151_665, hidden=256, layers=2, head="full", entropy="chunked", pass_="logprob"),
    # a small vocabulary: one recomputed layer (and the gradients) is the peak, not the head
    dict(tokens=8192, vocab=4096, hidden=1024, layers=2, head="full", entropy="off", pass_="update"),
]


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def build_config(row: dict):
    from transformers import Qwen2Config

    hidden = row["hidden"]
    return hidden, Qwen2Config(vocab_size=row["vocab"], hidden_size=hidden, intermediate_size=row.get("intermediate", 4 * hidden),
                         num_hidden_layers=row["layers"], num_attention_heads=max(hidden // 64, 1),
                         num_key_value_heads=max(hidden // 256, 1), max_position_embeddings=row["tokens"],
                         rope_theta=1e6, tie_word_embeddings=False, attn_implementation="sdpa", use_cache=False)


def build(row: dict):
    import torch
    from transformers import Qwen2ForCausalLM

    torch.manual_seed(0)
    _, config = build_config(row)
    model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    return model, config


def step(model, row: dict) -> None:
    """One micro-batch of the actor, as verl's engine computes it (see the module docstring)."""
    import torch
    from verl.utils import torch_functional as verl_F
    from verl.utils.experimental.torch_functional import FusedLinearForPPO

    from verl_swe.algo.loss import dapo_token_loss

    n = row["tokens"]
    g = torch.Generator().manual_seed(n)
    ids = torch.randint(0, row["vocab"], (1, n), generator=g)
    positions = torch.arange(n).unsqueeze(0)
    labels = torch.roll(ids, shifts=-1, dims=1)[0]  # verl's input_ids_rmpad_rolled
    action = torch.zeros(n, dtype=torch.bool)
    action[n - max(int(n * row.get("action_fraction", 0.9)), 1):] = True  # the response tail carries the loss
    grad = row["pass_"] == "update"
    entropy_mode = row["entropy"] if grad else row.get("entropy", "full")
    with torch.set_grad_enabled(grad), torch.autocast("cpu", dtype=torch.bfloat16):
        if row["head"] == "fused":
            hidden = model.model(input_ids=ids, position_ids=positions).last_hidden_state
            log_probs, entropy = FusedLinearForPPO().forward(hidden, model.lm_head.weight, labels.unsqueeze(0))
            log_probs, entropy = log_probs[0], entropy[0]
            mask = action
        else:
            kept = action.nonzero().flatten() if row["head"] == "sparse" else None
            if kept is not None:  # verl_swe/sparse_lm_head.py: the head sees the kept positions only
                handle = model.lm_head.register_forward_pre_hook(lambda _m, a: (a[0][:, kept],))
            logits = model(input_ids=ids, position_ids=positions).logits.squeeze(0)
            if kept is not None:
                handle.remove()
                labels, mask = labels[kept], torch.ones(len(kept), dtype=torch.bool)
            else:
                mask = action
            entropy = None
            if entropy_mode == "full":
                entropy = verl_F.entropy_from_logits(logits)
            elif entropy_mode == "chunked":
                entropy = verl_F.entropy_from_logits_with_chunking(logits, chunk_size=2048)
            elif entropy_mode == "checkpointed":
                entropy = torch.utils.checkpoint.checkpoint(verl_F.entropy_from_logits, logits, use_reentrant=False)
            log_probs = verl_F.logprobs_from_logits(logits=logits, labels=labels, inplace_backward=entropy is None)
            del logits
    if not grad:
        return
    old = (log_probs.detach() + 0.01 * torch.randn_like(log_probs)).detach()
    advantages = torch.where(torch.rand_like(log_probs) > 0.5, 1.0, -1.0)
    loss, _ = dapo_token_loss(old, log_probs.float(), advantages, mask.float(), eps_low=0.2, eps_high=0.28)
    if row["entropy"] != "off":
        loss = loss - 0.001 * verl_F.masked_mean(entropy.float(), mask.float())  # entropy_coeff 0.001
    loss.backward()


def worker(row: dict) -> dict:
    import gc

    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    t0 = time.perf_counter()
    model, config = build(row)
    # Warm up on a short sequence: imports (verl), thread pools and oneDNN's kernels are the process's, not
    # the micro-batch's, and must be in the baseline.
    step(model, {**row, "tokens": 64})
    model.zero_grad(set_to_none=True)
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current resident set
    base = _status("VmRSS")
    step(model, row)
    peak = _status("VmHWM")
    params = sum(p.numel() for p in model.parameters())
    out = {"measured_peak_gb": (peak - base) / GB, "baseline_rss_gb": base / GB, "params": params,
           "torch": torch.__version__}
    if not row.get("tracker", True):  # the tests' quick rows
        return {**out, "seconds": round(time.perf_counter() - t0, 1)}
    model.zero_grad(set_to_none=True)
    gc.collect()
    from torch.distributed._tools.mem_tracker import MemTracker

    tracker = MemTracker()
    tracker.track_external(model)
    with tracker:
        step(model, row)
    tensors = tracker.get_tracker_snapshot("peak")[torch.device("cpu")]
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    return {**out, "tensor_peak_gb": (tensors["Total"] - param_bytes) / GB, "seconds": round(time.perf_counter() - t0, 1)}


def plan_estimate(row: dict) -> dict:
    """plan.py's estimate of the same micro-batch (verl_swe/trainer/plan.py), with CPU autocast's dtypes (the
    softmax family stays bf16 here; on CUDA it is fp32). This model is not sharded: its bf16 gradients are all
    here at the end of backward (FSDP would keep a shard), and the LM head's weight gradient is there while
    the head's own backward runs."""
    from verl_swe.trainer.plan import Head, ModelShape, actor_activation_bytes, logprob_pass_bytes

    _, config = build_config(row)
    m = ModelShape.from_hf_config(config.to_dict())
    update = row["pass_"] == "update"
    head = Head(fused_kernels=row["head"] == "fused", entropy_grad=update and row["entropy"] != "off",
                entropy_checkpointing=row["entropy"] == "checkpointed", entropy_chunking=row["entropy"] == "chunked",
                sparse=row["head"] == "sparse", action_fraction=row.get("action_fraction", 0.3), softmax_bytes=2)
    if not update:
        return {"estimate_gb": logprob_pass_bytes(m, row["tokens"], head) / GB}
    t = actor_activation_bytes(m, row["tokens"], head)
    grads = 2 * m.params  # bf16, unsharded
    lm_phase = t["checkpointed inputs"] + t["LM head"] + 2 * m.vocab * m.hidden
    layer_phase = t["checkpointed inputs"] + t["layer recompute"] + grads
    return {"estimate_gb": max(lm_phase, layer_phase) / GB, "peak_phase": "LM head" if lm_phase > layer_phase
            else "layers (gradients)", **{f"plan_{k.replace(' ', '_')}_gb": round(v / GB, 4) for k, v in t.items()}}


def table(out: dict) -> str:
    lines = ["| row | positions | vocab | hidden x layers | head | entropy | pass | logit elements | measured (RSS) | "
             "tensors (MemTracker) | plan | plan / measured |", "|" + "---|" * 12]
    for r in out["results"]:
        rows = r["tokens"] * (r.get("action_fraction", 0.3) if r["head"] == "sparse" else 1)
        lines.append(f"| {r['row']} | {r['tokens']:,} | {r['vocab']:,} | {r['hidden']} x {r['layers']} | {r['head']} | "
                     f"{r['entropy']} | {r['pass_']} | {rows * r['vocab'] / 1e9:.2f} G | {r['measured_peak_gb']:.3f} GB | "
                     f"{r.get('tensor_peak_gb', float('nan')):.3f} GB | {r['estimate_gb']:.3f} GB | "
                     f"{r['estimate_over_measured']:.3f} |")
    return "\n".join(lines)


def run_row(row: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, "--worker", json.dumps(row)], capture_output=True, text=True,
                         env={**os.environ, **MALLOC_ENV}, timeout=3600)
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--rows", help="comma-separated row indices (default: all, and write --out)")
    parser.add_argument("--row", help="one row as JSON (keys of ROWS), measured and printed (the tests use it)")
    parser.add_argument("--append", action="store_true", help="with --rows: merge them into --out")
    parser.add_argument("--table", action="store_true", help="print --out as the markdown table of bench/README.md")
    parser.add_argument("--reestimate", action="store_true",
                        help="recompute the plan's estimates of the rows in --out (no measurement)")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("actor-memory-cpu-results.json"))
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    if args.table:
        print(table(json.loads(args.out.read_text())))
        return
    if args.reestimate:
        out = json.loads(args.out.read_text())
        for r in out["results"]:
            r.update(plan_estimate(ROWS[r["row"]]))
            r["estimate_over_measured"] = round(r["estimate_gb"] / r["measured_peak_gb"], 3)
        args.out.write_text(json.dumps(out, indent=1) + "\n")
        return
    picked = [int(i) for i in args.rows.split(",")] if args.rows else range(len(ROWS))
    rows = [(None, json.loads(args.row))] if args.row else [(i, ROWS[i]) for i in picked]
    results = []
    for i, row in rows:
        r = {"row": i, **row, **run_row(row), **plan_estimate(row)}
        r["estimate_over_measured"] = round(r["estimate_gb"] / r["measured_peak_gb"], 3)
        results.append(r)
        print(json.dumps(r), flush=True)
    machine = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "platform": platform.platform(),
               "cpus": os.cpu_count(), "python": platform.python_version()}
    if args.append and args.rows:
        out = json.loads(args.out.read_text())
        kept = [r for r in out["results"] if r["row"] not in {r["row"] for r in results}]
        out["results"] = sorted(kept + [{**r, "machine_date": machine["date"]} for r in results], key=lambda r: r["row"])
    elif args.rows or args.row:
        return
    else:
        out = {"machine": machine, "results": results}
    args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
