"""The cache of finished sandbox checks that lets a run resume: what invalidates an entry, what survives
a crash mid-write, and what is never cached."""

from __future__ import annotations

from tests.curate.variants import PAGER, variant
from verl_swe.curate.checks import CheckCache, CheckResult, check_key
from verl_swe.curate.config import load_config


def test_a_cached_check_depends_on_the_task_backend_and_sandbox_settings_only(mini_tasks):
    pager, cfg = mini_tasks[PAGER], load_config(None)
    key = check_key(pager, cfg, "docker")
    # row rules are recomputed every run, so their thresholds do not invalidate sandbox checks
    assert key == check_key(pager, load_config(None, {"complexity": {"max_files": 3}}), "docker")
    assert key != check_key(pager, load_config(None, {"checks": {"runs": 10}}), "docker")
    assert key != check_key(pager, cfg, "local")
    assert key != check_key(variant(pager, "v", test_patch="\n"), cfg, "docker")


def test_a_torn_last_line_is_ignored_and_infrastructure_failures_are_not_cached(tmp_path):
    path = tmp_path / "checks.jsonl"
    cache = CheckCache(path)
    cache.put("a", "task-a", CheckResult("determinism", "outcome varied", {"runs": 2}))
    cache.put("b", "task-b", CheckResult("sandbox_error", "sandbox: docker went away"))
    with path.open("a") as f:
        f.write('{"key": "c", "instance_id": "task-c", "resu')  # the process died here

    cache = CheckCache(path)
    assert cache.get("a") == CheckResult("determinism", "outcome varied", {"runs": 2})
    assert cache.get("b") is None and cache.get("c") is None
    cache.put("d", "task-d", CheckResult(None))
    assert CheckCache(path).get("d") == CheckResult(None)  # appended on a line of its own
    assert CheckCache(path, fresh=True).get("a") is None
