"""The LM head only where a log-prob is used: the positions whose next token carries loss.

verl's FSDP engine computes the vocabulary projection and log-softmax at every position of every sequence,
then masks all but the trained ones. An SWE trajectory is mostly prompt and observations: the action tokens
(response_mask = 1) are ~15-30% of a tiny CPU episode and a few percent of a 131k-token one, while the head
(152k x hidden) is the largest matmul per token and its logits the largest activation (rows x positions x
152k floats: 14 GB for one 4k-token CPU micro-batch's log-prob pass, which Ray's memory monitor killed).

A forward pre-hook on the model's output embedding hands it only the hidden states of the kept positions (an
exact (row, column) gather, in the packed and in the padded layout), and the log-probs and entropies computed
from those logits are scattered back to verl's layout; every other position holds 0, which every consumer
masks out (ppo_loss and the entropy/KL/mismatch metrics use `response_mask`, sft_loss uses `loss_mask`).
Log-probs, entropies and gradients at the kept positions equal the full head's
(tests/platform/test_sparse_lm_head.py); timings are in bench/README.md, "CPU pipeline".

It applies where that mapping is exact and falls back to verl's path otherwise: Ulysses sequence parallel,
packed-length padding, fused kernels, distillation, sum(pi^2), multimodal inputs. `VERL_SWE_SPARSE_LM_HEAD=0`
turns it off. Patched right after verl's transformer_impl module executes (verl_swe/import_hooks.py).
"""

from __future__ import annotations

import os

import torch

from verl_swe.import_hooks import after_import

_KEY = "verl_swe_kept_positions"
TEXT_INPUTS = {"input_ids", "attention_mask", "position_ids", "cu_seqlens", "cu_seqlens_cpu"}


def enabled() -> bool:
    return os.environ.get("VERL_SWE_SPARSE_LM_HEAD", "1") != "0"


def kept_positions(micro_batch) -> torch.Tensor | None:
    """Flat positions (in verl's packed order, sequence after sequence) whose log-prob a loss reads.

    Three layouts carry `loss_mask`. SFT: nested over the whole sequence (its offsets are input_ids'), and
    sft_loss reads log_prob[p] where loss_mask[p + 1] is set (it rolls the mask left by one). RL: the response
    mask over the responses only, nested (the v1 trainer, one row per TransferQueue sample) or padded (the
    legacy trainer); verl maps response token j of a sequence back to the packed position that predicts it with
    `no_padding_2_padding`, so the same function applied to the positions themselves gives the map."""
    from verl.workers.utils.padding import no_padding_2_padding

    loss_mask = micro_batch.get("loss_mask", None)
    if loss_mask is None:
        return None
    input_ids = micro_batch["input_ids"]
    total = input_ids.values().shape[0]
    if loss_mask.is_nested and torch.equal(loss_mask.offsets(), input_ids.offsets()):
        rolled = torch.roll(loss_mask.values(), shifts=-1, dims=0)
        kept = rolled.nonzero().flatten()
    else:
        if "prompts" not in micro_batch or "responses" not in micro_batch:
            return None
        positions = torch.arange(total, device=loss_mask.device)
        by_response = no_padding_2_padding(positions, micro_batch)  # (bsz, max_response_len), padded with 0
        if loss_mask.is_nested:
            loss_mask = torch.nested.to_padded_tensor(loss_mask, 0, output_size=tuple(by_response.shape))
        kept = by_response[loss_mask.bool()]
    if kept.numel() == 0:
        # An all-masked micro-batch (verl pads batches with such rows) still needs a graph for backward.
        kept = torch.zeros(1, dtype=torch.long, device=loss_mask.device)
    return torch.unique(kept)  # sorted


def _output_embedding(module):
    inner = getattr(module, "_fsdp_wrapped_module", module)  # FSDP1 wraps; FSDP2 keeps the module
    get = getattr(inner, "get_output_embeddings", None)
    return get() if get is not None else None


def _applies(engine, micro_batch) -> bool:
    from verl.utils import tensordict_utils as tu

    flag = lambda key, default=False: tu.get_non_tensor_data(data=micro_batch, key=key, default=default)  # noqa: E731
    return (enabled() and not engine.use_ulysses_sp and not flag("use_fused_kernels")
            and not flag("distillation_use_topk") and not flag("distillation_only")
            and not flag("calculate_sum_pi_squared") and isinstance(_output_embedding(engine.module), torch.nn.Module))


def _install_hook(engine) -> None:
    """Once per engine: the output embedding sees only the (row, column) hidden states the next forward
    asked for (`engine._verl_swe_head_index`), as a (1, kept, hidden) batch."""
    if getattr(engine, "_verl_swe_hooked", None) is engine.module:
        return

    def select(_module, args):
        index = engine.__dict__.pop("_verl_swe_head_index", None)
        if index is None:
            return None
        hidden = args[0]
        return (hidden[index].unsqueeze(0), *args[1:])

    _output_embedding(engine.module).register_forward_pre_hook(select)
    engine._verl_swe_hooked = engine.module


def _patch(transformer_impl) -> None:
    engine_cls = transformer_impl.FSDPEngineWithLMHead
    original_inputs, original_outputs = engine_cls.prepare_model_inputs, engine_cls.prepare_model_outputs

    def prepare_model_inputs(self, micro_batch):
        model_inputs, output_args = original_inputs(self, micro_batch)
        if (not _applies(self, micro_batch) or output_args.get("pad_size", 0)
                or set(model_inputs) - TEXT_INPUTS):  # multimodal inputs: left to verl
            return model_inputs, output_args
        kept = kept_positions(micro_batch)
        if kept is None:
            return model_inputs, output_args
        offsets = micro_batch["input_ids"].offsets()
        if "temperature_rmpad" in output_args:  # packed: one row of total_nnz positions
            index = (torch.zeros_like(kept), kept)
        else:  # padded: (bsz, max_seq_len), sequence i's position p at (i, p - offsets[i])
            rows = torch.searchsorted(offsets, kept, right=True) - 1
            index = (rows, kept - offsets[rows])
        _install_hook(self)
        self._verl_swe_head_index = index
        output_args[_KEY] = (kept, index, offsets)
        return model_inputs, output_args

    def prepare_model_outputs(self, output, output_args, micro_batch, logits_processor_func):
        self.__dict__.pop("_verl_swe_head_index", None)  # a forward that never reached the head
        if _KEY not in output_args:
            return original_outputs(self, output, output_args, micro_batch, logits_processor_func)
        from verl.utils import tensordict_utils as tu
        from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits

        kept, (rows, _), offsets = output_args[_KEY]
        logits = output.logits.squeeze(0)  # (kept, vocab): the hook gave the head only these positions
        if "temperature_rmpad" in output_args:
            temperature = output_args["temperature_rmpad"][kept]
        else:
            temperature = output_args["temperature"].to(logits.dtype)[rows]
        logits = logits / temperature.unsqueeze(-1)
        labels = output_args["input_ids_rmpad_rolled"][kept]
        total = output_args["input_ids_rmpad_rolled"].shape[0]

        def scatter(values: torch.Tensor) -> torch.Tensor:
            full = torch.zeros(total, dtype=values.dtype, device=values.device).index_put((kept,), values)
            return torch.nested.nested_tensor_from_jagged(full, offsets)

        model_output = {"log_probs": scatter(logprobs_from_logits(logits=logits, labels=labels))}
        if tu.get_non_tensor_data(data=micro_batch, key="calculate_entropy", default=False):
            model_output["entropy"] = scatter(entropy_from_logits(logits))
        return model_output

    engine_cls.prepare_model_inputs = prepare_model_inputs
    engine_cls.prepare_model_outputs = prepare_model_outputs


after_import("verl.workers.engine.fsdp.transformer_impl", _patch)
