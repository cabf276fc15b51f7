"""Atomic file writes: readers (and an interrupted run) never see half a file."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any


def write_text_atomic(path: Path, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # per process and thread: concurrent writers never share it
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


def write_json_atomic(path: Path, data: Any, indent: int = 2, **dumps_kwargs: Any) -> Path:
    return write_text_atomic(path, json.dumps(data, indent=indent, **dumps_kwargs) + "\n")
