# Skipping from the package: importing it skips the whole test module that imports it.
import pytest as _pytest

_pytest.skip("requires a newer platform", allow_module_level=True)
