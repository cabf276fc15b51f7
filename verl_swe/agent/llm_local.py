"""A local transformers model as the agent's model (CPU tests, demos): sampling with log-probs."""

from __future__ import annotations

import asyncio
import threading

from verl_swe.agent.llm import Generation, Sampling


class TransformersClient:
    def __init__(self, model, end_of_turn_id: int):
        self.model = model
        self.eot = end_of_turn_id
        self._lock = threading.Lock()  # one generate at a time: the model is not re-entrant

    async def generate(self, prompt_ids: list[int], sampling: Sampling, request_id: str) -> Generation:
        return await asyncio.to_thread(self._generate, list(prompt_ids), sampling)

    def _generate(self, prompt_ids: list[int], sampling: Sampling) -> Generation:
        import torch

        with self._lock, torch.no_grad():
            ids = torch.tensor([prompt_ids])
            greedy = sampling.temperature == 0
            out = self.model.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=sampling.max_tokens, do_sample=not greedy,
                temperature=None if greedy else sampling.temperature, top_p=None if greedy else sampling.top_p,
                top_k=None if sampling.top_k in (-1, 0) else sampling.top_k,
                repetition_penalty=sampling.repetition_penalty, eos_token_id=self.eot, pad_token_id=self.eot,
                output_scores=True, return_dict_in_generate=True,
            )
            new = out.sequences[0, len(prompt_ids):]
            scores = self.model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)[0]
        tokens = new.tolist()
        reason = "stop" if tokens and tokens[-1] == self.eot else "length"
        return Generation(tokens, scores[: len(tokens)].tolist(), reason)
