"""`verl-swe envs build` and `verl-swe evaluate` as a user runs them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

PAGER, ROMAN, HEADERS = "verl-swe-mini__pager-1", "verl-swe-mini__roman-1", "verl-swe-mini__headers-1"


def cli(*args, cache, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "verl_swe.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "VERL_SWE_CACHE": str(cache)})


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_envs_build_then_evaluate(tmp_path, mini_tasks, task_envs, session_backend):
    from tests.reward.tamper import TECHNIQUES

    cache = task_envs.store.cache_dir
    pager, roman, headers = mini_tasks[PAGER], mini_tasks[ROMAN], mini_tasks[HEADERS]
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [pager.model_dump(), '{"instance_id": "half a row"', roman.model_dump(),
                                                   headers.model_dump()])
    r = cli("envs", "build", "--instances", tasks, "--backend", session_backend, cache=cache)
    assert "3/3 environments ready" in r.stdout, r.stderr
    assert r.returncode == 1 and f"{tasks}:2" in r.stderr  # the malformed row is named, the rest built

    preds = write_jsonl(tmp_path / "preds.jsonl", [
        {"instance_id": PAGER, "model_name_or_path": "gold", "model_patch": pager.patch},
        {"instance_id": ROMAN, "model_name_or_path": "empty", "model_patch": None},
        {"instance_id": HEADERS, "model_name_or_path": "tamper", "model_patch": TECHNIQUES["report_init"].patch(headers)},
        {"instance_id": "not-a-task", "model_name_or_path": "x", "model_patch": ""},
    ])
    out = tmp_path / "out" / "report.json"
    r = cli("evaluate", "--instances", tasks, "--predictions", preds, "--backend", session_backend,
            "--workers", 2, "--output", out, cache=cache)
    assert r.returncode == 0, r.stderr
    report = json.loads(out.read_text())
    assert report["summary"] == {"total": 3, "resolved": 1, "unresolved": 2, "errors": 0, "tampered": 1,
                                 "static_flagged": 1, "empty_patches": 1, "invalid_task_rows": 1,
                                 "unknown_predictions": 1}
    assert report["instances"][PAGER]["resolved"] and not report["instances"][ROMAN]["resolved"]
    tampered = report["instances"][HEADERS]
    assert not tampered["resolved"] and tampered["tampered"]
    assert {"sentinel", "record", "machinery"} <= {x["check"] for x in tampered["integrity"]["reasons"]}
    # The table's integrity column (the tampered run, the other two ok), then why, with the checks that caught it.
    assert len(re.findall(r"│ tampered\s+│", r.stdout)) == 1 and len(re.findall(r"│ ok\s+│", r.stdout)) == 2, r.stdout
    assert re.search(rf"tampered {HEADERS} \([a-z, ]*sentinel[a-z, ]*\): ", r.stdout), r.stdout
    assert report["instances"][PAGER]["tests_status"]["FAIL_TO_PASS"]["success"] == pager.FAIL_TO_PASS
    assert report["unknown_predictions"] == ["not-a-task"]
    assert PAGER in r.stdout and "resolved" in r.stdout  # the table
    logs = out.parent / "report_logs"
    assert "PASSED tests/" in (logs / PAGER / "test_output.txt").read_text()
    assert json.loads((logs / PAGER / "report.json").read_text())["resolved"] is True


def test_evaluate_bad_predictions_names_the_row(tmp_path, mini_tasks):
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [mini_tasks[PAGER].model_dump()])
    preds = write_jsonl(tmp_path / "preds.jsonl", [{"instance_id": PAGER, "model_patch": ""}, {"model_patch": "x"}])
    r = cli("evaluate", "--instances", tasks, "--predictions", preds, "--backend", "local",
            "--output", tmp_path / "r.json", cache=tmp_path / "cache")
    assert r.returncode == 2 and f"{preds}:2: a prediction needs a string 'instance_id'" in r.stderr
    assert not (tmp_path / "r.json").exists()


def test_envs_build_bad_input_is_an_error_not_a_traceback(tmp_path, mini_tasks):
    missing = cli("envs", "build", "--instances", tmp_path / "nope.jsonl", "--backend", "local", cache=tmp_path / "c")
    assert missing.returncode == 2 and f"task file {tmp_path / 'nope.jsonl'} does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [mini_tasks[PAGER].model_dump()])
    unknown = cli("envs", "build", "--instances", tasks, "--instance-id", "ghost", "--backend", "local",
                  cache=tmp_path / "c")
    assert unknown.returncode == 2 and "unknown instance ids: ghost" in unknown.stderr


def test_a_broken_predictions_json_is_named(tmp_path):
    from verl_swe.reward.evaluate import PredictionsError, read_predictions

    preds = tmp_path / "preds.json"
    preds.write_text('[{"instance_id": "a",')
    with pytest.raises(PredictionsError, match=f"{preds}: invalid JSON"):
        read_predictions(preds)
    preds.write_text('{"a": {"model_patch": ""}, "b": "not a row"}')  # the instance_id-keyed form
    with pytest.raises(PredictionsError, match=r"preds.json\[row 1\]: a prediction needs a string 'instance_id'"):
        read_predictions(preds)
