"""Layered configuration dictionaries."""

from .layers import from_env, get_path, merge_layers
from .merge import deep_merge

__all__ = ["deep_merge", "from_env", "get_path", "merge_layers"]
