"""verl_swe.platform_cpu: verl picks a CPU platform by itself on a host with no accelerator.

Each check runs in a fresh interpreter: verl resolves its platform once per process and caches it, and
the plugin patches verl modules as they are imported. No VERL_* env var is set (they are removed).
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import subprocess
import sys
import textwrap

import pytest

from verl_swe.testing.tokenizer import qwen_tokenizer_dir


def _clean_env(**extra: str) -> dict[str, str]:
    # None of verl's platform / engine overrides: the plugin alone must select the CPU platform.
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERL_")}
    env.update(extra)
    return env


def _run(code: str, cwd, timeout: int = 120, **env: str) -> dict:
    """Runs `code` in a fresh interpreter; its last stdout line is a JSON result."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         cwd=cwd, env=_clean_env(**env), timeout=timeout)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_verl_picks_the_cpu_platform_without_env_vars(tmp_path):
    result = _run("""
        import json
        import verl
        from verl.plugin.platform import PlatformRegistry, get_platform
        from verl.utils import device

        module = device.get_torch_device()
        free, total = module.mem_get_info()
        module.empty_cache(), module.synchronize(), module.reset_peak_memory_stats()  # no-ops, must not raise
        print(json.dumps({
            "registered": "cpu" in PlatformRegistry.registered_names(),
            "platform": type(get_platform()).__module__ + "." + type(get_platform()).__name__,
            "device": device.get_device_name(), "device_id": device.get_device_id(),
            "backend": device.get_nccl_backend(), "ray_resource": device.get_resource_name(),
            "ipc": device.is_support_ipc(), "available": device.is_device_available(),
            "memory": [module.memory_allocated(), module.max_memory_reserved()], "mem_ok": 0 < free <= total,
            "device_module_name": module.get_device_name(), "stream": module.Stream.__module__,
        }))
    """, tmp_path)
    assert result == {
        "registered": True, "platform": "verl_swe.platform_cpu.PlatformCPU",
        "device": "cpu", "device_id": "cpu", "backend": "gloo", "ray_resource": "GPU", "ipc": False,
        "available": True, "memory": [0, 0], "mem_ok": True, "device_module_name": "CPU",
        "stream": "torch.cpu",  # unknown attributes fall through to torch.cpu
    }


def test_a_cuda_host_keeps_verl_s_platform(tmp_path):
    # With a CUDA device visible the CPU platform declines, so verl resolves exactly as it would without
    # the plugin: here (no nvidia-smi) its own fallback, "nvidia".
    result = _run("""
        import json
        import torch
        torch.cuda.is_available = lambda: True
        import verl
        from verl.utils.device import get_device_name, get_nccl_backend
        from verl_swe.platform_cpu import PlatformCPU

        cpu_available = PlatformCPU().is_platform_available(use_smi_check=True)
        print(json.dumps([cpu_available, get_device_name(), get_nccl_backend()]))
    """, tmp_path)
    assert result == [False, "cuda", "nccl"]


def test_verl_process_group_init_uses_plain_gloo(tmp_path):
    # Both of verl's entry points: the torchrun one (sft_trainer) and the Ray one, through the name that
    # engine_workers bound at import. verl's own backend string would raise "Duplicate device type cpu".
    result = _run("""
        import json
        import torch, torch.distributed as dist
        import verl.workers.engine_workers as engine_workers
        from verl.utils import distributed

        ranks = distributed.initialize_global_process_group()
        first = [dist.get_backend(), dist.get_world_size()]
        t = torch.ones(2)
        dist.all_reduce(t)
        distributed.destroy_global_process_group()

        engine_workers.initialize_global_process_group_ray(timeout_second=None)
        second = [dist.get_backend(), dist.get_world_size()]
        distributed.destroy_global_process_group()
        print(json.dumps({"ranks": list(ranks), "torchrun": first, "ray": second, "sum": t.tolist()}))
    """, tmp_path, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    assert result == {"ranks": [0, 0, 1], "torchrun": ["gloo", 1], "ray": ["gloo", 1], "sum": [1.0, 1.0]}


def test_fsdp_engines_resolve_for_cpu(tmp_path):
    result = _run("""
        import json
        from verl.utils.device import get_device_name
        from verl.workers.engine import EngineRegistry

        print(json.dumps([get_device_name()] + [
            EngineRegistry.get_engine_cls(model_type, backend).__name__
            for model_type in ("language_model", "value_model") for backend in ("fsdp", "fsdp2")
        ]))
    """, tmp_path)
    assert result == ["cpu", "FSDPEngineWithLMHead", "FSDPEngineWithLMHead",
                      "FSDPEngineWithValueHead", "FSDPEngineWithValueHead"]


MAKE_FIXTURES = """
    import json, sys
    import pandas as pd
    from verl_swe.testing.tiny import tiny_qwen2
    from verl_swe.testing.tokenizer import qwen_tokenizer

    tok = qwen_tokenizer()
    model = tiny_qwen2(len(tok), hidden_size=128, layers=2)  # 4 heads: head_dim 32
    model.save_pretrained("model")
    tok.save_pretrained("model")
    rows = [{"messages": [{"role": "system", "content": "You add numbers."},
                          {"role": "user", "content": f"What is {a} plus {b}?"},
                          {"role": "assistant", "content": f"{a} plus {b} is {a + b}."}]}
            for a, b in [(1, 2), (3, 4), (5, 6), (7, 8)]]
    pd.DataFrame(rows).to_parquet("train.parquet")
    print(json.dumps("ok"))
"""


@pytest.mark.slow
def test_verl_sft_trainer_runs_two_steps_on_cpu(tmp_path):
    qwen_tokenizer_dir()  # fails clearly without the dev extra's tokenizer
    _run(MAKE_FIXTURES, tmp_path)
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1",
        "-m", "verl.trainer.sft_trainer",
        f"data.train_files={tmp_path / 'train.parquet'}", "data.train_batch_size=2",
        "data.micro_batch_size_per_gpu=2", "data.max_length=128", "data.num_workers=0",
        # the Qwen template adds an empty <think> block to the last assistant turn only
        "data.ignore_input_ids_mismatch=True",
        f"model.path={tmp_path / 'model'}", "+model.override_config.attn_implementation=sdpa",
        "engine.strategy=fsdp2", "engine.use_torch_compile=False",
        # verl's auto_set_device never switches trainer.device to cpu; the trainer puts tensors there
        "trainer.device=cpu", "trainer.total_training_steps=2", "trainer.logger=[console]",
        f"trainer.default_local_dir={tmp_path / 'ckpt'}", "trainer.resume_mode=disable",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=_clean_env(), timeout=240)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-6000:]

    losses = [float(x) for x in re.findall(r"train/loss:([^ ]+) ", log)]
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses), losses
    step = tmp_path / "ckpt" / "global_step_2"
    assert (step / "model_world_size_1_rank_0.pt").stat().st_size > 0
    assert (step / "huggingface" / "config.json").is_file()
    assert (tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").read_text().strip() == "2"


def test_a_lone_rank_picks_another_port_when_verls_pick_was_taken(tmp_path):
    # verl's MASTER_PORT comes from binding port 0 and closing it (get_master_addr_port), so another process
    # can take it before the rendezvous store binds it: EADDRINUSE. One rank owns the store: it picks again.
    taken = socket.socket()
    taken.bind(("", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        result = _run("""
            import json, os
            import torch.distributed as dist
            import verl.workers.engine_workers as engine_workers

            engine_workers.initialize_global_process_group_ray(timeout_second=None)
            print(json.dumps({"ray": [dist.get_backend(), dist.get_world_size()],
                              "port": int(os.environ["MASTER_PORT"])}))
            dist.destroy_process_group()
        """, tmp_path, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    finally:
        taken.close()
    assert result["ray"] == ["gloo", 1] and result["port"] != port
