"""Build a configuration from layers and read values by dotted path."""

from __future__ import annotations

from functools import reduce
from typing import Any, Mapping

from .merge import deep_merge

_MISSING = object()


def merge_layers(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Merge layers left to right: later layers override earlier ones."""
    return reduce(deep_merge, layers, {})


def _coerce(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    try:
        return int(text)
    except ValueError:
        return text


def from_env(environ: Mapping[str, str], prefix: str = "APP_", sep: str = "__") -> dict[str, Any]:
    """``APP_DB__PORT=6543`` becomes ``{"db": {"port": 6543}}``."""
    config: dict[str, Any] = {}
    for name, raw in sorted(environ.items()):
        if not name.startswith(prefix) or name == prefix:
            continue
        *parents, leaf = name[len(prefix):].lower().split(sep)
        node = config
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = _coerce(raw)
    return config


def get_path(config: Mapping[str, Any], dotted: str, default: Any = _MISSING) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            if default is _MISSING:
                raise KeyError(dotted)
            return default
        node = node[part]
    return node
