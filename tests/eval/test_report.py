"""The eval report (paper 1.8): Pass@1 = mean over runs +- SEM, unbiased Pass@k, per repository, exit
statuses, swebench predictions per run; unreadable files named while the rest still count."""

import json

import pytest

from tests.eval.conftest import make_trajectory
from verl_swe.agent.trajectories import save_trajectory
from verl_swe.eval.report import build_report, write_predictions
from verl_swe.eval.runs import RunDirError, read_run, subset_ids
from verl_swe.types import ExitStatus

MATRIX = {  # task -> resolved in runs 0, 1, 2
    "astropy__astropy-1": [True, False, True],
    "django__django-2": [False, False, False],
    "django__django-3": [True, True, True],
}


def test_pass_at_1_is_the_mean_over_runs_with_its_standard_error(make_run):
    report = build_report(read_run(make_run(MATRIX)))
    # Per run: 2/3, 1/3, 2/3. Mean 5/9; deviations 1/9, -2/9, 1/9 -> sample var (6/81)/2 = 1/27;
    # SEM = sqrt(1/27 / 3) = 1/9.
    assert report["pass@1_per_run"] == pytest.approx([2 / 3, 1 / 3, 2 / 3])
    assert report["pass@1"] == pytest.approx(5 / 9) and report["pass@1_sem"] == pytest.approx(1 / 9)
    # Unbiased Pass@k per task (n=3): astropy c=2: 1 - C(1,k)/C(3,k) -> k=2: 1; django-2: 0; django-3: 1.
    assert report["pass@k"]["1"] == pytest.approx(report["pass@1"])
    assert report["pass@k"]["2"] == pytest.approx(2 / 3) and report["pass@k"]["3"] == pytest.approx(2 / 3)
    django = report["per_repo"]["django/django"]
    assert django["tasks"] == 2 and django["pass@1"] == pytest.approx(0.5) and django["pass@1_sem"] == 0.0
    assert django["pass@3"] == pytest.approx(0.5) and report["per_repo"]["astropy/astropy"]["pass@3"] == 1.0
    assert report["exit_status"] == {"submitted": 9} and report["submit_rate"] == 1.0
    assert report["metrics"]["swe/tool/bash"] == 1.0 and report["metrics"]["swe/num_turns"] == 3.0


def test_missing_episodes_count_as_unresolved_and_are_reported(make_run):
    run_dir = make_run({"a__b-1": [True, True], "a__b-2": [True]})  # a__b-2 has no run 1 yet
    report = build_report(read_run(run_dir), runs=2)
    assert report["missing_episodes"] == 1 and report["pass@1_per_run"] == [1.0, 0.5]
    assert report["per_task"]["a__b-2"] == {"repo": "a/b", "resolved": 1, "episodes": 1, "resolved_runs": [0]}


def test_infra_failures_are_scored_apart_not_as_failures_of_the_model(make_run):
    # a__b-2's run 1 never ran: its sandbox did not start (and still did not on the rerun). It is no failure of
    # the model: run 1 is scored over a__b-1 alone, a__b-2's Pass@k over its one run that ran.
    run_dir = make_run({"a__b-1": [True, False], "a__b-2": [True]})
    failed = make_trajectory("a__b-2", 1, False, ExitStatus.SANDBOX_ERROR, graded=False)
    failed.infra_failure = "sandbox_start"
    save_trajectory(run_dir, failed)
    report = build_report(read_run(run_dir), runs=2)
    assert report["pass@1_per_run"] == [1.0, 0.0] and report["pass@1"] == pytest.approx(0.5)
    assert (report["infra_failed_episodes"], report["missing_episodes"], report["scored_episodes"]) == (1, 0, 3)
    assert report["unsettled_episodes"] == {"sandbox_start": 1}
    assert report["pass@k"]["1"] == pytest.approx((0.5 + 1.0) / 2)
    assert report["pass@k"]["2"] == pytest.approx(1.0)  # only a__b-1 has 2 runs that ran; it resolved one


def test_an_unreadable_trajectory_is_named_and_the_rest_still_count(make_run):
    run_dir = make_run(MATRIX)
    broken = run_dir / "trajectories" / "django__django-2" / "django__django-2.1.json"
    broken.write_text('{"instance_id": "django__django-2", "episode_id"')  # cut off mid-write
    foreign = run_dir / "trajectories" / "django__django-2" / "notes.json"
    foreign.write_text('["not", "a", "trajectory"]')
    run = read_run(run_dir)
    assert {e.path for e in run.errors} == {broken, foreign}
    assert "JSONDecodeError" in str(next(e for e in run.errors if e.path == broken))
    report = build_report(run)
    assert report["episodes"] == 8 and report["missing_episodes"] == 1
    assert any(str(broken) in e for e in report["load_errors"])


def test_a_missing_run_directory_is_a_clear_error(tmp_path):
    with pytest.raises(RunDirError, match=f"{tmp_path / 'nope'}: no such run directory"):
        read_run(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunDirError, match="has no trajectories/ folder"):
        read_run(tmp_path / "empty")


def test_predictions_are_one_swebench_file_per_run_with_what_was_graded(make_run, tmp_path):
    # Run 1 of astropy hit max_turns: not submitted, so not graded; its prediction must be empty, or the
    # official harness would grade a patch this report counted as unresolved.
    run_dir = make_run(MATRIX, statuses={("astropy__astropy-1", 1): ExitStatus.MAX_TURNS})
    paths = write_predictions(read_run(run_dir), list(MATRIX), 3, tmp_path / "preds", "my-model")
    assert [p.name for p in paths] == ["run_0.jsonl", "run_1.jsonl", "run_2.jsonl"]
    rows = [json.loads(line) for line in paths[1].read_text().splitlines()]
    assert [r["instance_id"] for r in rows] == sorted(MATRIX)
    assert all(set(r) == {"instance_id", "model_name_or_path", "model_patch"} for r in rows)
    assert rows[0]["model_patch"] == "" and rows[1]["model_patch"].endswith("+new 1\n")


def test_the_checkpoint_subset_is_fixed_by_its_seed():
    ids = [f"repo__x-{i}" for i in range(500)]
    first = subset_ids(ids, 50, seed=0)
    assert len(first) == len(set(first)) == 50 and set(first) <= set(ids)
    assert subset_ids(list(reversed(ids)), 50, seed=0) == first  # the file's row order does not matter
    assert subset_ids(ids, 50, seed=1) != first
    assert subset_ids(ids[:10], 50) == sorted(ids[:10])
