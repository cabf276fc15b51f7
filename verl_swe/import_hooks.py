"""Run a callback right after a module executes (Python has no post-import hook).

Lets the plugin patch verl and vLLM modules without importing them at `import verl` (heavy, and circular
there), and before other modules bind the patched names with `from x import y`. Several callbacks may wait
for one module: they run in the order they were registered."""

from __future__ import annotations

import importlib.abc
import sys
from collections import defaultdict


class _AfterImport(importlib.abc.MetaPathFinder):
    """Wraps the loader of every awaited module so its callbacks run right after it executes."""

    def __init__(self):
        self.callbacks: dict[str, list] = defaultdict(list)

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.callbacks:
            return None
        for finder in sys.meta_path:
            spec = None if finder is self else finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                exec_module = spec.loader.exec_module
                callbacks = self.callbacks.pop(fullname)

                def exec_then_call(module):
                    exec_module(module)
                    for callback in callbacks:
                        callback(module)

                spec.loader.exec_module = exec_then_call
                return spec
        return None


_FINDER = _AfterImport()


def after_import(name: str, callback) -> None:
    if name in sys.modules:
        callback(sys.modules[name])
        return
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    _FINDER.callbacks[name].append(callback)
