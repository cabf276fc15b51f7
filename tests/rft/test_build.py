"""`build_sft_data`: the funnel counts every trajectory file as kept or excluded for a named reason, bad
files are named and skipped while the rest is processed, and an empty result says why."""

import json
import logging

import pandas as pd
import pytest

from tests.rft.episodes import cmd, play, script
from verl_swe.agent.trajectories import save_trajectory
from verl_swe.rft.build import NothingToTrain, build_sft_data
from verl_swe.testing.tokenizer import qwen_tokenizer


def build(tmp_path, run_dirs, **kw):
    kw.setdefault("max_tokens", 100_000)
    return build_sft_data(run_dirs, tmp_path / "out" / "sft.parquet", qwen_tokenizer(), **kw)


async def test_funnel_counts_every_exclusion_and_the_rest_is_kept(tmp_path, caplog):
    run, empty = tmp_path / "run", tmp_path / "no-resolved"
    await play(script("paper"), instance_id="a__a-1", episode_id="a.0", run_dir=run)
    await play(script("paper"), instance_id="a__a-1", episode_id="a.1", run_dir=run)  # same turns: a duplicate
    await play(script("paper", format_errors_at=()), instance_id="a__a-1", episode_id="a.2", run_dir=run)
    await play(script("paper"), instance_id="b__b-1", episode_id="b.0", resolved=False, run_dir=run)
    # graded though never submitted (the turn cap ended it): would teach the model not to submit
    res = await play([cmd("paper", "ls", 0), cmd("paper", "ls", 1)], instance_id="c__c-1", episode_id="c.0",
                     max_turns=2, run_dir=tmp_path / "x")
    assert res.trajectory.exit_status.value == "max_turns"
    res.trajectory.resolved = True
    save_trajectory(run, res.trajectory)
    long = await play(script("paper", format_errors_at=(), turns=30), instance_id="d__d-1", episode_id="d.0", run_dir=run)
    bad = run / "trajectories" / "e__e-1"
    bad.mkdir()
    good_json = (run / "trajectories" / "a__a-1" / "a.0.json").read_text()
    (bad / "truncated.json").write_text(good_json[: len(good_json) // 2])
    (bad / "v2.json").write_text(json.dumps({**json.loads(good_json), "format_version": 2}))
    (bad / "alien.json").write_text(json.dumps({"instance_id": "e", "steps": []}))
    await play(script("paper"), instance_id="f__f-1", episode_id="f.0", resolved=False, run_dir=empty)

    max_tokens = long.trajectory.prompt_tokens + long.trajectory.response_tokens - 1
    with caplog.at_level(logging.WARNING):
        report = build(tmp_path, [run, empty], max_tokens=max_tokens)

    assert report.files == 10 and report.episodes == 7 and report.resolved == 5 and report.kept == 2
    assert report.excluded == {"duplicate": 1, "not_resolved": 2, "resolved_not_submitted": 1, "too_long": 1,
                               "unreadable": 1, "incompatible_format": 2}
    assert report.files == report.kept + sum(report.excluded.values())
    problems = {p["path"].rsplit("/", 1)[1]: p for p in report.problems}
    assert set(problems) == {"truncated.json", "v2.json", "alien.json"}
    assert "truncated" in problems["truncated.json"]["message"]
    assert "format_version 2" in problems["v2.json"]["message"]
    assert report.run_dirs[str(empty)].episodes == 1 and report.run_dirs[str(empty)].resolved == 0
    assert any(str(empty) in r.message and "no resolved episode" in r.message for r in caplog.records)
    assert any("truncated.json" in r.message for r in caplog.records)
    assert report.tasks == {"seen": 5, "resolved": 3, "kept": 1}

    df = pd.read_parquet(report.out)
    assert sorted(df.episode_id) == ["a.0", "a.2"] and (df.num_tokens <= max_tokens).all()
    assert [list(m) for m in df.assistant_loss_mask] == [[1, 0, 1, 0, 1, 1], [1] * 6]
    saved = json.loads((tmp_path / "out" / "sft.report.json").read_text())
    assert saved["kept"] == 2 and saved["excluded"] == report.excluded and saved["paper"]["kept"] == 6548
    assert saved["tokens"]["total"] == int(df.num_tokens.sum())


async def test_nothing_kept_is_an_error_that_says_why(tmp_path):
    run = tmp_path / "run"
    await play(script("paper"), resolved=False, run_dir=run)
    with pytest.raises(NothingToTrain, match=r"no trajectory kept from 1 files.*not_resolved"):
        build(tmp_path, [run, tmp_path / "missing"])
    assert not (tmp_path / "out" / "sft.parquet").exists()
    report = json.loads((tmp_path / "out" / "sft.report.json").read_text())
    assert report["kept"] == 0 and report["excluded"] == {"not_resolved": 1}
    assert report["run_dirs"][str(tmp_path / "missing")]["files"] == 0


async def test_behaviour_cloning_keeps_submitted_failures_but_not_unsubmitted_ones(tmp_path):
    run = tmp_path / "run"
    await play(script("paper"), episode_id="t.0", resolved=False, run_dir=run)  # submitted, failed the tests
    res = await play([cmd("paper", "ls", 0), cmd("paper", "ls", 1)], episode_id="t.1", max_turns=2,
                     resolved=False, run_dir=run)
    assert res.trajectory.exit_status.value == "max_turns"
    assert build(tmp_path, [run], resolved_only=False).kept == 1
    with pytest.raises(NothingToTrain):  # RFT (the default) keeps neither
        build(tmp_path, [run])


async def test_duplicates_across_run_dirs_and_the_task_cap(tmp_path):
    for run in ("r1", "r2"):
        await play(script("paper"), episode_id="t.0", run_dir=tmp_path / run)
    await play(script("paper", format_errors_at=()), episode_id="t.1", run_dir=tmp_path / "r2")
    await play(script("paper", format_errors_at=(2,)), episode_id="t.2", run_dir=tmp_path / "r2")
    report = build(tmp_path, [tmp_path / "r1", tmp_path / "r2"], max_per_task=2)
    assert report.kept == 2 and report.excluded == {"duplicate": 1, "over_task_cap": 1}
    kept = build(tmp_path, [tmp_path / "r1", tmp_path / "r2"], dedupe=False)
    assert kept.kept == 4


async def test_a_trajectory_whose_turns_do_not_match_its_messages_is_named(tmp_path):
    res = await play(script("paper"), run_dir=tmp_path / "run")
    res.trajectory.turns.pop(2)
    save_trajectory(tmp_path / "run", res.trajectory)
    with pytest.raises(NothingToTrain):
        build(tmp_path, [tmp_path / "run"])
    report = json.loads((tmp_path / "out" / "sft.report.json").read_text())
    assert report["excluded"] == {"bad_structure": 1}
    assert "5 turns but 6 assistant messages" in report["problems"][0]["message"]
