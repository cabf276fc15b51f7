"""Training-data curation (P1 Sec. 4.1): SWE-rebench rows to a clean RL dataset, every decision explained."""

from verl_swe.curate.config import CurateConfig, CurateConfigError, load_config
from verl_swe.curate.pipeline import curate

__all__ = ["CurateConfig", "CurateConfigError", "curate", "load_config"]
