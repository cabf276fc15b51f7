"""`verl-swe eval --subset NAME|FILE|N` and the report's `setting`: which subset, decoding and context produced
its numbers, read from the episodes themselves; a run directory is never resumed under another setting."""

import json
import re

import pytest
from typer.testing import CliRunner

from tests.eval.conftest import make_trajectory
from verl_swe.agent.trajectories import save_trajectory
from verl_swe.cli import app
from verl_swe.eval.subsets import SUBSETS, SubsetError, select_subset

PAPER = {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "min_p": 0.0, "repetition_penalty": 1.05}
ROLLOUT = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0}
IDS = ["verl-swe-mini__pager-1", "verl-swe-mini__roman-1", "verl-swe-mini__semver-1"]


@pytest.fixture
def tasks(tmp_path, mini_tasks):
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(t.model_dump_json() + "\n" for t in mini_tasks.values()))
    return path


def episodes(run_dir, ids, runs, sampling, context_tokens=131_072):
    for iid in ids:
        for r in range(runs):
            traj = make_trajectory(iid, r, resolved=(r == 0))
            traj.metadata.update(sampling={**sampling, "max_tokens": 4096, "stop_token_ids": [151645, 151643]},
                                 limits={"context_tokens": context_tokens, "max_turns": 80, "max_new_tokens": 4096})
            save_trajectory(run_dir, traj)


def eval_cli(*args):
    return CliRunner().invoke(app, ["eval", *map(str, args)])


def said(result) -> str:
    """The command's output as one line of text (typer boxes and wraps usage errors)."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.output).split())


def test_a_subset_file_lists_ids_under_a_header_and_must_be_all_there(tmp_path):
    f = tmp_path / "mine.txt"
    f.write_text("# from: somewhere\n# 2 ids\nrepo__a-1\n\nrepo__b-2\nrepo__a-1\n")
    ids, info = select_subset(["repo__a-1", "repo__b-2", "repo__c-3"], str(f))
    assert ids == ["repo__a-1", "repo__b-2"] and info == {"name": "mine", "file": str(f), "size": 2}
    with pytest.raises(SubsetError, match="1 of the 2 ids of subset 'mine'.*repo__b-2"):
        select_subset(["repo__a-1"], str(f))
    with pytest.raises(SubsetError, match="not a registered subset"):
        select_subset(["repo__a-1"], "verified-5O")


def test_the_named_verified_50_is_registered_and_says_where_its_list_is():
    named = SUBSETS["verified-50"]
    if named.file.is_file():  # bundled: 50 ids of SWE-bench Verified under a header naming its source
        header = [line for line in named.file.read_text().splitlines() if line.startswith("#")]
        assert any("2508.03501" in line for line in header)
        ids, info = select_subset(ids_in(named.file), "verified-50")
        assert len(ids) == info["size"] == 50
    else:
        with pytest.raises(SubsetError, match="has no id list bundled"):
            select_subset([], "verified-50")


def ids_in(path):
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def test_the_report_says_which_subset_decoding_and_context_produced_it(tmp_path, tasks):
    run_dir = tmp_path / "run"
    episodes(run_dir, IDS, 2, PAPER)
    subset = tmp_path / "three.txt"
    subset.write_text("# three mini tasks\n" + "\n".join(IDS) + "\n")
    out = eval_cli("--instances", tasks, "--out", run_dir, "--runs", 2, "--report-only", "--subset", subset)
    assert out.exit_code == 0, out.output
    report = json.loads((run_dir / "report.json").read_text())
    assert report["tasks"] == 3 and report["pass@1"] == 0.5
    assert report["subset"]["name"] == "three" and report["subset"]["instance_ids"] == IDS
    assert report["setting"] == {"decoding": PAPER, "context_tokens": 131_072, "max_turns": 80, "max_new_tokens": 4096}
    assert "subset three (3 tasks); decoding temperature=0.7, top_p=0.8, top_k=20" in out.output
    assert "context 131072 tokens, 80 turns" in out.output

    # Episodes of another decoding in the same directory: the report names the mix instead of one setting.
    episodes(run_dir, ["verl-swe-mini__semver-1"], 3, ROLLOUT)  # replaces its runs 0-1, adds run 2
    out = eval_cli("--instances", tasks, "--out", run_dir, "--runs", 3, "--report-only", "--subset", subset)
    mixed = json.loads((run_dir / "report.json").read_text())["setting"]["mixed"]
    assert sorted(m["episodes"] for m in mixed) == [3, 4] and "MIXED settings" in out.output


def test_a_run_directory_is_not_resumed_under_another_decoding_or_context(tmp_path, tasks):
    run_dir = tmp_path / "run"
    episodes(run_dir, IDS, 1, ROLLOUT, context_tokens=65_536)  # run with --decoding rollout at 65k
    common = ["--instances", tasks, "--out", run_dir, "--endpoint", "http://127.0.0.1:9", "--tool-set", "paper",
              "--model", "Qwen/Qwen2.5-72B-Instruct", "--max-turns", 80, *sum((["--instance-id", i] for i in IDS), [])]
    refused = eval_cli(*common, "--context-tokens", 65_536)  # default decoding: the model's, not the rollout's
    assert refused.exit_code == 2 and "holds 3 episodes run with" in said(refused)
    refused = eval_cli(*common, "--decoding", "rollout", "--context-tokens", 131_072)
    assert refused.exit_code == 2 and '"context_tokens": 65536' in said(refused)
