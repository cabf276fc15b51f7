"""Load .env files with ``${VAR}`` interpolation and apply them to an environment."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping, MutableMapping

from .parser import parse

_REF_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def interpolate(values: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Replace ``${NAME}`` with an earlier value from the file, else from `environ`, else ""."""
    environ = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for key, value in values.items():
        out[key] = _REF_RE.sub(lambda m: out.get(m.group(1), environ.get(m.group(1), "")), value)
    return out


def load(path: str | Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    return interpolate(parse(Path(path).read_text(encoding="utf-8")), environ)


def apply(values: Mapping[str, str], environ: MutableMapping[str, str], override: bool = False) -> list[str]:
    """Copy `values` into `environ`; existing keys are kept unless `override`. Returns the keys set."""
    changed = []
    for key, value in values.items():
        if override or key not in environ:
            environ[key] = value
            changed.append(key)
    return changed
