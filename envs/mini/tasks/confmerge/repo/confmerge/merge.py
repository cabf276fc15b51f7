"""Recursive merging of configuration mappings."""

from __future__ import annotations

from copy import deepcopy
from typing import Any, Mapping


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Return a new dict with `override` merged into `base`.

    Nested mappings are merged key by key, at any depth; any other value (lists included)
    from `override` replaces the one in `base`. Neither argument is modified.
    """
    merged = deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = {**merged[key], **deepcopy(dict(value))}
        else:
            merged[key] = deepcopy(value)
    return merged
