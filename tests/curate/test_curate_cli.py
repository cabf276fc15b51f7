"""`verl-swe curate` as a user runs it: a mix of good and bad tasks becomes a parquet of the good ones, a
funnel, and one CSV row per dropped task with its reason; a second run resumes from the first."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pyarrow.parquet as pq

from tests.curate.variants import (PAGER, broken_env, external_state, hangs, import_error, low_quality, too_large,
                                   variant, write_rows, writes_state)
from verl_swe.curate import curate, load_config


def cli(*args, cache, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "verl_swe.cli", "curate", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "VERL_SWE_CACHE": str(cache)})


def dropped(report) -> dict[str, tuple[str, str]]:
    with (report / "dropped.csv").open() as f:
        return {row["instance_id"] or row["where"]: (row["rule"], row["reason"]) for row in csv.DictReader(f)}


def test_curate_drops_each_bad_task_with_its_reason_and_resumes(tmp_path, mini_tasks, task_envs, session_backend):
    pager = mini_tasks[PAGER]
    good = [pager, writes_state(pager)]
    sandboxed = [external_state(pager), import_error(pager), hangs(pager), broken_env(pager)]
    rows = [*good, *sandboxed, too_large(pager), low_quality(pager, issue_text_score=3),
            variant(pager, "leak", instance_id="django__django-11099"), '{"instance_id": "cut off',
            {k: v for k, v in pager.model_dump().items() if k != "FAIL_TO_PASS"} | {"instance_id": "no-f2p"}]
    tasks = tmp_path / "tasks.jsonl"
    write_rows(tasks, rows)
    report, out = tmp_path / "report", tmp_path / "train.parquet"
    config = load_config(None, {"checks": {"runs": 3, "test_timeout_s": 20}})

    # An earlier run that got through the two good tasks before it was stopped.
    write_rows(tmp_path / "first.jsonl", good)
    first = __import__("asyncio").run(curate(tmp_path / "first.jsonl", out, report, config, task_envs))
    assert first["kept"] == 2

    r = cli("--input", tasks, "--output", out, "--report", report, "--backend", session_backend, "--workers", 2,
            "--runs", 3, "--test-timeout", 20, cache=task_envs.store.cache_dir)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "2 of 11 tasks kept" in r.stdout and "2 sandbox checks reused from earlier runs" in r.stdout

    table = pq.read_table(out).to_pylist()
    assert [row["extra_info"]["instance_id"] for row in table] == [t.instance_id for t in good]
    assert all(row["agent_name"] == "swe_agent" for row in table)

    drops = dropped(report)
    assert {k: rule for k, (rule, _) in drops.items()} == {
        f"{tasks}:10": "malformed", "no-f2p": "malformed", too_large(pager).instance_id: "complexity",
        low_quality(pager).instance_id: "quality", "django__django-11099": "decontamination",
        broken_env(pager).instance_id: "environment", hangs(pager).instance_id: "sanity",
        import_error(pager).instance_id: "correctness_log", external_state(pager).instance_id: "determinism",
    }
    assert drops["no-f2p"][1] == "field 'FAIL_TO_PASS': Field required"
    assert drops[hangs(pager).instance_id][1] == "the gold patch does not resolve the task: tests timed out after 20 s"
    assert "ModuleNotFoundError: No module named 'pager.extra'" in drops[import_error(pager).instance_id][1]
    assert drops[broken_env(pager).instance_id][1]  # the build's own first line of error
    assert drops[external_state(pager).instance_id][1].startswith("outcome varied: run 2 of 2 not resolved")

    funnel = json.loads((report / "funnel.json").read_text())
    assert [(s["rule"], s["dropped"], s["remaining"]) for s in funnel["funnel"]] == [
        ("malformed", 2, 9), ("correctness_metadata", 0, 9), ("complexity", 1, 8), ("quality", 1, 7),
        ("decontamination", 1, 6), ("environment", 1, 5), ("sandbox_error", 0, 5), ("sanity", 1, 4),
        ("correctness_log", 1, 3), ("determinism", 1, 2)]
    # the sandbox checks of both runs are cached once each; the good tasks were not checked again
    cached = [json.loads(line)["instance_id"] for line in (report / "checks.jsonl").read_text().splitlines()]
    assert sorted(cached) == sorted(t.instance_id for t in good + sandboxed)
    decisions = [json.loads(line) for line in (report / "decisions.jsonl").read_text().splitlines()]
    assert {d["instance_id"] for d in decisions if d["cached"]} == {t.instance_id for t in good}
    kept = next(d for d in decisions if d["instance_id"] == PAGER)
    assert kept["details"]["determinism"]["outcomes"] == ["resolved"] * 3
    assert (report / "logs" / "empty" / PAGER / "test_output.txt").exists()


def test_row_rules_alone_and_bad_options(tmp_path, mini_tasks):
    pager = mini_tasks[PAGER]
    tasks = tmp_path / "tasks.jsonl"
    write_rows(tasks, [pager, "not json", too_large(pager)])
    out, report = tmp_path / "train.parquet", tmp_path / "report"
    r = cli("--input", tasks, "--output", out, "--report", report, "--no-sandbox", "--max-files", 9,
            "--exclude-repo", "verl-swe-mini/roman", cache=tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    assert "2 of 3 tasks kept" in r.stdout  # 9 files allowed, so only the broken row goes
    assert dropped(report) == {f"{tasks}:2": ("malformed", "invalid JSON: Expecting value: line 1 column 1 (char 0)")}
    funnel = json.loads((report / "funnel.json").read_text())
    assert funnel["funnel"][-1] == {"rule": "determinism", "description": funnel["funnel"][-1]["description"],
                                    "dropped": None, "remaining": 2, "skipped": True}
    assert funnel["config"]["decontamination"]["repos"] == ["verl-swe-mini/roman"]

    bad = tmp_path / "curate.yaml"
    bad.write_text("quality:\n  drop_at: three\n")
    r = cli("--input", tasks, "--output", out, "--report", report, "--config", bad, cache=tmp_path / "cache")
    assert r.returncode == 2 and f"curation config {bad}: quality.drop_at" in r.stderr
    r = cli("--input", tmp_path / "missing.jsonl", "--output", out, "--report", report, "--no-sandbox",
            cache=tmp_path / "cache")
    assert r.returncode == 2 and "missing.jsonl does not exist" in r.stderr
