"""Plots: training curves from what verl's own `file` logger writes, and the eval report's PNGs."""

import logging

from verl_swe.eval.plots import plot_eval, plot_learning, plot_training
from verl_swe.eval.report import build_report
from verl_swe.eval.runs import read_run

PNG = b"\x89PNG\r\n\x1a\n"


def test_training_curves_from_verls_file_logger(tmp_path, monkeypatch, caplog):
    from verl.utils.tracking import Tracking

    path = tmp_path / "metrics.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(path))
    tracking = Tracking(project_name="p", experiment_name="e", default_backend=["file"])
    for step in range(1, 4):
        data = {"swe/reward": 0.1 * step, "swe/resolved": 0.05 * step, "swe/num_turns": 10.0 + step,
                "swe/groups_kept_frac": 0.5, "training/global_step": step}
        if step == 3:
            data["val-aux/swe/resolved/mean@10"] = 0.3
        tracking.log(data=data, step=step)
    tracking.finish()
    with open(path, "a") as f:
        f.write("{truncated\n")  # a crashed run's last line

    with caplog.at_level(logging.WARNING, logger="verl_swe.eval.plots"):
        written = plot_training(path, tmp_path / "plots")
    names = {p.name for p in written}
    assert names == {"reward.png", "pass_at_1_val.png", "groups_kept.png", "turns.png"}
    assert all(p.read_bytes().startswith(PNG) for p in written)
    notes = caplog.text
    assert "mismatch.png not drawn" in notes and "submit_rate.png not drawn" in notes
    assert "format_errors.png not drawn" in notes
    assert f"{path}:4: skipped" in notes


def test_eval_plots(make_run, tmp_path):
    report = build_report(read_run(make_run({"a__b-1": [True, False], "c__d-2": [False, False]})))
    written = plot_eval(report, tmp_path / "plots")
    assert {p.name for p in written} == {"pass_at_k.png", "pass_at_1_runs.png", "per_repo.png", "exit_status.png"}
    assert all(p.read_bytes().startswith(PNG) for p in written)


def test_learning_plots_compare_the_arms(tmp_path, caplog):
    import json

    arms = {}
    for arm, sign in (("treatment", 1), ("control", -1)):
        path = tmp_path / f"{arm}.jsonl"
        path.write_text("".join(json.dumps({"step": s, "data": {"swe/reward": 0.2 + sign * 0.1 * s,
                                                                 "swe/resolved": 0.3 + sign * 0.05 * s,
                                                                 "swe/exit/format_errors": 0.5 - sign * 0.1 * s}}) + "\n"
                                    for s in (1, 2, 3)))
        arms[arm] = path
    point = lambda p: {"pass@1": p, "pass@1_sem": 0.05}  # noqa: E731
    evals = {"treatment": {"before": point(0.2), "after": point(0.6)},
             "control": {"before": point(0.2), "after": point(0.1)}}
    with caplog.at_level(logging.WARNING, logger="verl_swe.eval.plots"):
        written = plot_learning(arms, evals, tmp_path / "plots")
    assert {p.name for p in written} == {"learning_reward.png", "learning_resolved.png", "learning_format_errors.png",
                                         "learning_eval.png"}
    assert all(p.read_bytes().startswith(PNG) for p in written)
    assert "learning_turns.png not drawn: no arm logged swe/num_turns" in caplog.text
