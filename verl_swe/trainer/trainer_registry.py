"""Registers `trainer.v1.trainer_mode=swe_sync` (spread_trainer.py) in every process, once verl's v1 trainers
are imported: not at `import verl` (the plugin's entry point), where importing them would be circular."""

import importlib

from verl_swe.import_hooks import after_import

after_import("verl.trainer.ppo.v1", lambda _: importlib.import_module("verl_swe.trainer.spread_trainer"))
