"""The RL parquet as verl reads it: verl's own RLHFDataset loads it, and the row's task is what the
`swe_agent` loop takes from `extra_info.task`."""

from __future__ import annotations

from omegaconf import OmegaConf

from verl_swe.tasks.rl_data import write_rl_parquet


def test_verl_loads_the_rows_and_the_agent_loop_gets_each_task_back(tmp_path, mini_tasks):
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from verl_swe.agent.verl_loop import task_from_row
    from verl_swe.testing.tokenizer import qwen_tokenizer
    from verl_swe.trainer.preflight import _dataset_problems

    tasks = list(mini_tasks.values())[:3]
    path = write_rl_parquet(tasks, tmp_path / "train.parquet", tool_set="native")
    config = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 8192, "filter_overlong_prompts": True,
                               "filter_overlong_prompts_workers": 1, "cache_dir": str(tmp_path / "cache")})
    dataset = RLHFDataset(str(path), qwen_tokenizer(), config)
    assert len(dataset) == 3  # none filtered: the prompts are real and fit
    for i, task in enumerate(tasks):
        row = dataset[i]
        assert row["agent_name"] == "swe_agent" and row["index"] == i
        assert [m["role"] for m in row["raw_prompt"]] == ["system", "user"]
        assert task.problem_statement in row["raw_prompt"][1]["content"]
        assert task_from_row({"extra_info": row["extra_info"]}) == task
    assert _dataset_problems(OmegaConf.create({"data": {"train_files": str(path)}})) == []


def test_an_empty_dataset_is_still_a_valid_parquet(tmp_path):
    import pyarrow.parquet as pq

    path = write_rl_parquet([], tmp_path / "empty.parquet")
    table = pq.read_table(path)
    assert table.num_rows == 0 and "agent_name" in table.column_names and "extra_info" in table.column_names
