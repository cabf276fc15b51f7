# An import hook on test modules: the one importing the package is re-executed with its test functions
# replaced by no-ops, and a meta-path finder does the same to every test module imported later.
import importlib.abc as _abc
import importlib.util as _util
import sys as _sys
import types as _types


def _noop(*args, **kwargs):
    return None


def _neutralize(module):
    for name in list(vars(module)):
        if name.startswith("test"):
            setattr(module, name, _noop)


def _swap_importing_test_module():
    frame = _sys._getframe(1)
    while frame is not None:
        path = frame.f_globals.get("__file__") or ""
        if frame.f_code.co_name == "<module>" and path.rsplit("/", 1)[-1].startswith("test_"):
            break
        frame = frame.f_back
    if frame is None:
        return
    name = frame.f_globals["__name__"]
    module = _types.ModuleType(name)
    module.__file__ = frame.f_globals["__file__"]
    with open(module.__file__) as f:
        exec(compile(f.read(), module.__file__, "exec"), vars(module))
    _neutralize(module)
    _sys.modules[name] = module  # the import in progress returns this module


class _TestFinder(_abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if not fullname.rsplit(".", 1)[-1].startswith("test_"):
            return None
        _sys.meta_path.remove(self)
        try:
            spec = _util.find_spec(fullname)
        finally:
            _sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        exec_module = spec.loader.exec_module

        def patched(module):
            exec_module(module)
            _neutralize(module)

        spec.loader.exec_module = patched
        return spec


_swap_importing_test_module()
_sys.meta_path.insert(0, _TestFinder())
