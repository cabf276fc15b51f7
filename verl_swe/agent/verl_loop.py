"""`SWEAgentLoop`: the SWE agent as a verl 0.9.1 `AgentLoopBase`, selected by `agent_name: swe_agent`.

Registered through `actor_rollout_ref.rollout.agent.agent_loop_config_path` (see
`verl_swe/trainer/config/agent_loop.yaml`): the YAML entry's keys are this loop's `AgentConfig`. The
task comes from the dataset row's `extra_info.task` (the task row, as a mapping or a JSON string).
"""

from __future__ import annotations

import gc
import json
import logging
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput

from verl_swe.agent.config import AgentConfig
from verl_swe.agent.llm import Sampling, VerlServerClient
from verl_swe.agent.runner import AgentRunner
from verl_swe.eval.metrics import episode_metrics
from verl_swe.tasks import Task

logger = logging.getLogger(__name__)
_RUNNERS: dict[tuple[str, int], AgentRunner] = {}  # verl builds one loop object per trajectory; share the rest
# Keys verl passes to every agent loop that are not ours.
_VERL_KWARGS = {"tools", "name"}


def shared_runner(config: AgentConfig, tokenizer) -> AgentRunner:
    key = (config.model_dump_json(), id(tokenizer))
    if key not in _RUNNERS:
        if not _RUNNERS:
            # Move everything imported so far (verl, torch, transformers: ~500k objects) out of the
            # collector's reach: a full collection over them stalls every episode of the worker ~0.3 s.
            gc.freeze()
        _RUNNERS[key] = AgentRunner(config, tokenizer)
    return _RUNNERS[key]


def task_from_row(kwargs: dict[str, Any], swe: bool = True) -> Task | dict:
    extra = kwargs.get("extra_info") or {}
    row = extra.get("task") if isinstance(extra, dict) else None
    if row is None:
        raise ValueError("swe_agent needs the task row in the dataset's extra_info.task")
    row = json.loads(row) if isinstance(row, str) else dict(row)
    return Task.model_validate(row) if swe else row


class SWEAgentLoop(AgentLoopBase):
    def __init__(self, trainer_config, server_manager, tokenizer, processor, dataset_cls, data_config,
                 hf_model_type: str | None = None, **kwargs):
        super().__init__(trainer_config, server_manager, tokenizer, processor, dataset_cls, data_config,
                         hf_model_type=hf_model_type)
        from omegaconf import DictConfig, ListConfig, OmegaConf

        ours = {k: OmegaConf.to_container(v, resolve=True) if isinstance(v, (DictConfig, ListConfig)) else v
                for k, v in kwargs.items() if k not in _VERL_KWARGS}
        self.agent_config = AgentConfig.model_validate(ours)
        self.runner = shared_runner(self.agent_config, tokenizer)

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        task = task_from_row(kwargs, swe=self.agent_config.env == "swe")
        limits = self.runner.limits
        sampling = Sampling(max_tokens=limits.max_new_tokens, temperature=sampling_params.get("temperature", 1.0),
                            top_p=sampling_params.get("top_p", 1.0), top_k=sampling_params.get("top_k", -1),
                            repetition_penalty=sampling_params.get("repetition_penalty", 1.0))
        llm = VerlServerClient(self.server_manager, sampling_params)
        result = await self.runner.run(task, llm, sampling, max_response_tokens=self.rollout_config.response_length)
        traj = result.trajectory
        prompt_ids, response_ids, mask, logprobs = (result.prompt_ids, result.response_ids, result.response_mask,
                                                    result.response_logprobs)
        if not response_ids:  # the episode ended before the model spoke: one masked token keeps shapes valid
            prompt_ids = prompt_ids or self.runner.chat.prompt(traj.messages or [{"role": "user", "content": ""}])
            response_ids, mask, logprobs = [self.runner.chat.end_of_turn_id], [0], [0.0]
        reward, mask = self._overlong(traj, mask)
        if traj.infra_failure:
            # Not the model's doing (verl_swe/agent/infra.py). verl needs every output back, so it is returned but
            # carries no gradient and no reward, and the sampler removes it from its group before the group's
            # advantages are computed (verl_swe/trainer/infra_filter.py).
            reward, mask = 0.0, [0] * len(mask)
        gen_s = sum(t.generation_s for t in traj.turns)
        tool_s = sum(t.tool_s for t in traj.turns)
        info = {"resolved": float(traj.resolved), "exit_status": traj.exit_status.value,
                "num_turns": traj.num_turns, "turn_penalty": traj.turn_penalty, "patch_chars": len(traj.patch),
                "error": traj.error or "", "instance_id": traj.instance_id, "infra_failure": traj.infra_failure or "",
                # the reward-hack monitor, also for validation (verl logs val-aux/<source>/<key>/mean@n)
                "hack_flagged": float(any(traj.hack_flags.values())), "hack_zeroed": float(traj.hack_zeroed)}
        return AgentLoopOutput(
            prompt_ids=prompt_ids, response_ids=response_ids, response_mask=mask, response_logprobs=logprobs,
            reward_score=reward, num_turns=2 * traj.num_turns + 1,
            metrics=AgentLoopMetrics(generate_sequences=gen_s, tool_calls=tool_s),
            extra_fields={"reward_extra_info": info, "swe_metrics": episode_metrics(traj), **self._versions(llm),
                          "infra_failure": traj.infra_failure or ""},
        )

    @staticmethod
    def _versions(llm: VerlServerClient) -> dict[str, int]:
        """The weight versions the episode was sampled with: verl's trainer needs both keys on every sample (its
        staleness metrics), and its server manager only sets them on its own outputs, not on ours."""
        versions = llm.weight_versions or [VerlServerClient.last_weight_version]  # ended before the model spoke
        return {"min_global_steps": min(versions), "max_global_steps": max(versions)}

    def _overlong(self, traj, mask: list[int]) -> tuple[float, list[int]]:
        """The optional overlong treatments (verl_swe/algo/overlong.py); both off by default."""
        import torch

        from verl_swe.algo.overlong import soft_overlong_penalty
        from verl_swe.types import ExitStatus

        opts, reward = self.agent_config.overlong, traj.reward
        if opts.mask_truncated and traj.exit_status in (ExitStatus.CONTEXT_EXHAUSTED, ExitStatus.GENERATION_CUT,
                                                        ExitStatus.MAX_TURNS, ExitStatus.TIMEOUT):
            mask = [0] * len(mask)
        if opts.soft_penalty_cache_tokens:
            max_len = self.rollout_config.response_length
            reward += float(soft_overlong_penalty(torch.tensor([traj.response_tokens]), max_len,
                                                  min(opts.soft_penalty_cache_tokens, max_len))[0])
        return reward, mask
