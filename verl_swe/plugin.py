"""Loaded by verl in every process (the `verl.plugins` entry point): makes verl_swe's names known.

- the `swe_agent` agent loop with its defaults, so `agent_name: swe_agent` works even without an
  agent_loop_config_path (a YAML entry of that name, loaded later by the worker, replaces it);
- a `cpu` platform for hosts with no accelerator (verl_swe/platform_cpu.py);
- mapping-valued model config overrides (YaRN) on transformers 5 (verl_swe/verl_compat.py);
- the LM head computed only where a loss reads a log-prob (verl_swe/sparse_lm_head.py);
- the tool sets, environments and the `swe_dapo` policy loss registered by verl_swe;
- the `swe_sync` trainer mode, once verl's v1 trainers load (verl_swe/trainer/trainer_registry.py).
"""

import importlib

# Registries fill on import: the `cpu` platform (first: before anything resolves the platform), the `swe`
# environment, the `paper` and `native` tool sets, the `swe_dapo` loss.
_MODULES = ("verl_swe.platform_cpu", "verl_swe.verl_compat", "verl_swe.sparse_lm_head", "verl_swe.agent.env",
            "verl_swe.tools.toolsets", "verl_swe.algo.verl_registry", "verl_swe.trainer.trainer_registry")
for _module in _MODULES:
    importlib.import_module(_module)


def _register_agent_loop() -> None:
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    # Not verl's @register decorator on the class: importing the class would then overwrite a YAML
    # entry of the same name with bare defaults (../shared/docs/verl-0.9.1.md, "Pitfall").
    _agent_loop_registry.setdefault("swe_agent", {"_target_": "verl_swe.agent.verl_loop.SWEAgentLoop"})


_register_agent_loop()
