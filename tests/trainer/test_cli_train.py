"""`verl-swe plan` and `verl-swe curriculum` as a user runs them."""

import json
import subprocess
import sys

from verl_swe.agent.trajectories import save_trajectory
from verl_swe.types import ExitStatus, Trajectory


def cli(*args):
    return subprocess.run([sys.executable, "-m", "verl_swe.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def test_plan_accepts_the_recipe_and_refuses_a_bad_layout():
    ok = cli("plan", "--config-name", "swe_dapo_qwen72b_stage2", "swe.run_root=/shared/runs")
    assert ok.returncode == 0 and "12 / 192" in ok.stdout and "ok" in ok.stdout
    bad = cli("plan", "--config-name", "swe_dapo_qwen7b", "trainer.n_gpus_per_node=6")
    assert bad.returncode == 1 and "ulysses_sequence_parallel_size=4 does not divide the 6 GPUs" in bad.stderr


def test_curriculum_builds_the_stage2_pool(tmp_path, mini_tasks):
    ids = sorted(mini_tasks)[:4]  # solved 3/3, 1/3, 0/3, and one never attempted
    run = tmp_path / "stage1"
    for iid, solved in zip(ids[:3], (3, 1, 0)):
        for k in range(3):
            save_trajectory(run, Trajectory(iid, f"{iid}.{k}", exit_status=ExitStatus.SUBMITTED, resolved=k < solved))
    tasks = tmp_path / "pool.jsonl"
    tasks.write_text("".join(mini_tasks[i].model_dump_json() + "\n" for i in ids))
    out = tmp_path / "stage2.jsonl"
    r = cli("curriculum", "--trajectories", run, "--instances", tasks, "--out", out)
    assert r.returncode == 0, r.stderr
    kept = [json.loads(line)["instance_id"] for line in out.read_text().splitlines()]
    assert kept == [ids[1], ids[3]]
    counts = json.loads((tmp_path / "stage2.counts.json").read_text())
    assert counts["attempts"][ids[0]] == 3 and counts["successes"][ids[1]] == 1


def test_curriculum_reads_the_stage1_rl_parquet_and_writes_stage2s(tmp_path, mini_tasks):
    # The chain of the README's GPU sequence: stage 1's data.train_files and run dir in, stage 2's data out.
    import pyarrow.parquet as pq
    from omegaconf import OmegaConf

    from tests.trainer.test_configs import check, config
    from verl_swe.tasks.rl_data import write_rl_parquet

    ids = sorted(mini_tasks)[:4]
    stage1 = write_rl_parquet([mini_tasks[i] for i in ids], tmp_path / "data" / "stage1.parquet", tool_set="native")
    run = tmp_path / "qwen72b-stage1"
    for iid, solved in zip(ids, (3, 1, 0, 2)):
        for k in range(3):
            save_trajectory(run, Trajectory(iid, f"{iid}.{k}", exit_status=ExitStatus.SUBMITTED, resolved=k < solved))
    out = run / "stage2.parquet"
    r = cli("curriculum", "--trajectories", run, "--instances", stage1, "--out", out)
    assert r.returncode == 0, r.stderr
    rows = pq.read_table(out).to_pylist()
    assert [row["extra_info"]["instance_id"] for row in rows] == [ids[1]]  # 1/3 solved; 3/3, 0/3, 2/3 dropped
    # stage 1's rows as they were (here: the native tool set's prompt), and stage 2 trains on them by default
    assert rows[0] == pq.read_table(stage1).to_pylist()[1]
    c = config("swe_dapo_qwen72b_stage2", f"swe.run_root={tmp_path}", "data.train_batch_size=1")
    assert OmegaConf.select(c, "data.train_files") == str(out)
    check(c, check_unknown_keys=False)
