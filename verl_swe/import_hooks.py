"""Run a callback right after a module executes (Python has no post-import hook).

Lets the plugin patch verl and vLLM modules without importing them at `import verl` (heavy, and circular
there), and before other modules bind the patched names with `from x import y`."""

from __future__ import annotations

import importlib.abc
import sys


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls `callback(module)` right after the module `name` executes, by wrapping its loader."""

    def __init__(self, name: str, callback):
        self.name, self.callback = name, callback

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        for finder in sys.meta_path:
            spec = None if finder is self else finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                exec_module = spec.loader.exec_module

                def exec_then_call(module):
                    exec_module(module)
                    self.callback(module)

                spec.loader.exec_module = exec_then_call
                return spec
        return None


def after_import(name: str, callback) -> None:
    if name in sys.modules:
        callback(sys.modules[name])
    else:
        sys.meta_path.insert(0, _AfterImport(name, callback))
