"""envs/mini: the committed rows are what the sources generate (base commits are reproducible)."""

import importlib.util
import json

from verl_swe.tasks.repos import mini_dir


def test_tasks_jsonl_matches_its_sources(tmp_path):
    spec = importlib.util.spec_from_file_location("build_tasks", mini_dir() / "build_tasks.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    rows = [json.loads(line) for line in (mini_dir() / "tasks.jsonl").read_text().splitlines()]
    names = sorted(p.name for p in (mini_dir() / "tasks").iterdir() if p.is_dir())
    assert len(rows) == len(names) >= 8
    for row, name in zip(rows, names):
        assert row == build.build_row(name, tmp_path), f"envs/mini/tasks.jsonl is stale for {name}: run envs/mini/build_tasks.py"
