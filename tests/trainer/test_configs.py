"""Every recipe composes on CPU with the paper's values, passes the preflight, and bad configs are
refused with the key and the fix named."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module

from verl_swe.trainer.preflight import PreflightError, preflight, write_agent_loop_config

ROOT = Path(__file__).resolve().parents[2]


SHARED = "swe.run_root=/shared/runs"  # the 16-node recipes need absolute paths every node mounts


def config(name: str, *overrides: str):
    with initialize_config_module("verl_swe.trainer.config", version_base=None):
        return compose(config_name=name, overrides=[SHARED, *overrides] if "qwen72b" in name else list(overrides))


def check(c, **kw) -> str:
    """The preflight's own rules; test_rehearse.py covers the rehearsal it also runs."""
    return preflight(c, rehearse=False, **kw)


def test_stage1_has_the_papers_values():
    c = config("swe_dapo_qwen72b")
    a, r = c.actor_rollout_ref.actor, c.actor_rollout_ref.rollout
    assert c.data.train_batch_size == 300 and r.n == 10  # P1 Table 3
    assert c.data.max_prompt_length + c.data.max_response_length == 65536 == c.swe.agent.limits.context_tokens
    assert (a.clip_ratio_low, a.clip_ratio_high) == (0.2, 0.3) and a.policy_loss.loss_mode == "swe_dapo"
    assert a.loss_agg_mode == "token-mean" and not a.use_kl_loss and a.entropy_coeff == 0 and a.ppo_epochs == 1
    # YaRN x2 takes Qwen2.5's 32k positions to the 65k context, in the trainer and in vLLM alike (P1 App. C)
    yarn, hf = c.actor_rollout_ref.model.override_config, r.engine_kwargs.vllm.hf_overrides
    assert (yarn.rope_parameters.rope_type, yarn.rope_parameters.factor, yarn.rope_parameters.rope_theta) == \
        ("yarn", 2.0, 1e6) and hf.rope_parameters == yarn.rope_parameters
    assert yarn.max_position_embeddings == hf.max_position_embeddings == r.max_model_len == 65536
    assert a.optim.lr == 1e-6 and a.optim.weight_decay == 0.1 and a.optim.clip_grad == 1.0
    assert (r.temperature, r.top_p, r.top_k) == (1.0, 1.0, -1) and r.engine_kwargs.vllm.generation_config == "vllm"
    assert c.swe.agent.limits.max_turns == 40 and c.swe.agent.limits.penalty_threshold == 10
    assert c.algorithm.adv_estimator == "grpo" and not c.algorithm.filter_groups.enable
    assert c.trainer.v1.sampler.custom_sampler.name == "DropZeroAdvantageGroups"
    assert c.trainer.nnodes == 16 and c.trainer.n_gpus_per_node == 8
    # stage 1 continues the RFT model, by path (README, "GPU sequence"); 72 iterations (swe_dapo.yaml)
    assert c.actor_rollout_ref.model.path == "/shared/runs/qwen72b-rft/hf"
    assert c.trainer.default_local_dir == "/shared/runs/qwen72b-stage1" == c.swe.agent.trajectory_dir
    assert c.trainer.total_training_steps == 72 and c.trainer.total_epochs * 7249 // 300 >= 72
    assert c.trainer.v1.sampler.sampler_kwargs.drop_signal == "resolved" and c.trainer.v1.trainer_mode == "swe_sync"
    assert "KV cache per token" in check(c)


def test_stage2_changes_only_the_papers_stage2_keys():
    c = config("swe_dapo_qwen72b_stage2")
    a, r, m = c.actor_rollout_ref.actor, c.actor_rollout_ref.rollout, c.actor_rollout_ref.model
    assert c.data.max_prompt_length + c.data.max_response_length == 131072 == r.max_model_len
    assert c.data.train_batch_size == 100 and a.clip_ratio_high == 0.26 and c.swe.agent.limits.max_turns == 80
    assert m.override_config.rope_parameters.factor == 4.0 == r.engine_kwargs.vllm.hf_overrides.rope_parameters.factor
    assert m.override_config.max_position_embeddings == 131072
    assert c.swe.agent.limits.context_tokens == 131072
    # the chain: stage 1's export, the curriculum's parquet in stage 1's run dir, 40 more iterations
    assert m.path == "/shared/runs/qwen72b-stage1/hf" and c.data.train_files == "/shared/runs/qwen72b-stage1/stage2.parquet"
    assert c.trainer.default_local_dir == "/shared/runs/qwen72b-stage2" and c.trainer.total_training_steps == 40
    s1 = config("swe_dapo_qwen72b")
    assert (a.clip_ratio_low, a.optim.lr, r.n, r.temperature) == (s1.actor_rollout_ref.actor.clip_ratio_low,
                                                                 s1.actor_rollout_ref.actor.optim.lr, 10, 1.0)
    report = check(c)
    assert any(line.startswith("KV cache per 131072-token trajectory") and line.endswith(" 42.9 GB")
               for line in report.splitlines())  # ~43 GB for Qwen2.5-72B at 131k


def test_one_node_7b_recipe():
    c = config("swe_dapo_qwen7b")
    assert c.trainer.nnodes == 1 and c.actor_rollout_ref.model.path == "Qwen/Qwen2.5-7B-Instruct"
    assert c.actor_rollout_ref.model.override_config.rope_parameters.factor == 2.0
    check(c)


@pytest.mark.parametrize("overrides,message", [
    (["+actor_rollout_ref.actor.clip_ratio_hihg=0.3"], "unknown key 'actor_rollout_ref.actor.clip_ratio_hihg'"),
    (["actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size=3"], "ulysses_sequence_parallel_size=3"),
    (["actor_rollout_ref.actor.ppo_mini_batch_size=13"], "130 trajectories is not divisible by data parallelism 16"),
    (["actor_rollout_ref.rollout.temperature=0.7"], "rollout temperature=0.7"),
    (["actor_rollout_ref.rollout.top_k=20"], "swe.allow_biased_sampling=true"),
    (["~actor_rollout_ref.rollout.engine_kwargs.vllm.generation_config"], "generation_config=vllm"),
    (["+swe.agent.limits.max_turn=40"], "swe.agent.limits.max_turn"),
    (["swe.agent.limits.context_tokens=200000"], "exceeds data.max_prompt_length + data.max_response_length"),
    (["actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean"], "swe_dapo (Eq. 8) is a token-mean"),
    (["algorithm.filter_groups.enable=true"], "pick one"),
    (["trainer.v1.trainer_mode=colocate_async"], "supports the sync trainers only"),
    (["data.max_response_length=200000", "swe.agent.limits.context_tokens=65536"], "exceeds rollout.max_model_len"),
])
def test_bad_configs_are_refused_by_name(overrides, message):
    with pytest.raises(PreflightError, match=message.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")):
        check(config("swe_dapo_qwen72b", *overrides))


def test_relative_paths_are_refused_on_many_nodes_only():
    with initialize_config_module("verl_swe.trainer.config", version_base=None):
        c = compose(config_name="swe_dapo_qwen72b", overrides=["swe.run_root=runs"])  # the default without SWE_RUN_ROOT
    with pytest.raises(PreflightError) as e:
        check(c)
    for key in ("trainer.default_local_dir=runs/qwen72b-stage1", "swe.agent.trajectory_dir=runs/qwen72b-stage1",
                "actor_rollout_ref.model.path=runs/qwen72b-rft/hf", "data.train_files=runs/data/stage1.parquet"):
        assert f"{key} is relative: with trainer.nnodes=16" in str(e.value)
    check(config("swe_dapo_qwen7b"))  # one node: relative paths are the driver's, made absolute by main.py


def test_total_epochs_cannot_cut_the_iterations_short(tmp_path, mini_tasks):
    from verl_swe.tasks.rl_data import write_rl_parquet

    data = write_rl_parquet(list(mini_tasks.values()), tmp_path / "train.parquet")  # 10 tasks
    c = config("swe_dapo_qwen7b", f"data.train_files={data}", f"data.val_files={data}", "data.train_batch_size=4",
               "actor_rollout_ref.actor.ppo_mini_batch_size=4", "trainer.total_epochs=5", "trainer.total_training_steps=12")
    with pytest.raises(PreflightError, match=r"trainer.total_epochs=5 stops the run after 10 of "
                                             r"trainer.total_training_steps=12 iterations .* set trainer.total_epochs>=6"):
        check(c)
    report = check(config("swe_dapo_qwen7b", f"data.train_files={data}", f"data.val_files={data}",
                          "data.train_batch_size=4", "actor_rollout_ref.actor.ppo_mini_batch_size=4",
                          "trainer.total_training_steps=12"))
    assert "iterations: 12 iterations: 10 tasks / 4 per iteration = 2 per pass" in report


def test_biased_sampling_can_be_opted_into():
    check(config("swe_dapo_qwen72b", "actor_rollout_ref.rollout.top_p=0.9", "swe.allow_biased_sampling=true"))


def test_a_dataset_without_agent_name_is_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist([{"prompt": "x", "extra_info": {"task": "{}"}}]), path)
    with pytest.raises(PreflightError, match="agent_name: swe_agent"):
        check(config("swe_dapo_qwen72b", f"data.train_files={path}"))


def test_a_dataset_with_a_malformed_task_row_is_refused_naming_the_row(tmp_path, mini_tasks):
    # Found before training, not by a rollout worker hours in: every row is checked, the bad ones named.
    from verl_swe.tasks.rl_data import write_rl_parquet

    good = list(mini_tasks.values())[:3]
    broken = good[1].model_copy(update={"FAIL_TO_PASS": "[not json"})  # as a bad export would write it
    path = write_rl_parquet([good[0], broken, good[2]], tmp_path / "train.parquet")
    with pytest.raises(PreflightError, match=rf"data.train_files {path}: 1 bad row\(s\): row 1: extra_info.task: "
                                             r"field 'FAIL_TO_PASS'"):
        check(config("swe_dapo_qwen72b", f"data.train_files={path}"))
    write_rl_parquet(good, path)
    check(config("swe_dapo_qwen72b", f"data.train_files={path}", f"data.val_files={path}", "data.train_batch_size=3"))


def test_agent_loop_yaml_is_written_from_the_swe_section(tmp_path):
    from omegaconf import OmegaConf

    from verl_swe.agent.config import AgentConfig

    c = config("swe_dapo_qwen72b_stage2", f"trainer.default_local_dir={tmp_path}")
    [entry] = OmegaConf.load(write_agent_loop_config(c, tmp_path))
    assert entry.name == "swe_agent" and entry._target_ == "verl_swe.agent.verl_loop.SWEAgentLoop"
    cfg = AgentConfig.model_validate({k: v for k, v in OmegaConf.to_container(entry).items()
                                      if k not in ("name", "_target_")})
    assert cfg.limits.max_turns == 80 and cfg.trajectory_dir == tmp_path


def test_recipe_prints_the_composed_config_and_starts_nothing():
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    out = subprocess.run(["bash", str(ROOT / "recipes/run_dapo_qwen72b.sh"), "--cfg", "job",
                          "actor_rollout_ref.actor.optim.lr=2e-6"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "clip_ratio_high: 0.3" in out.stdout and "lr: 2.0e-06" in out.stdout
    stage2 = subprocess.run(["bash", str(ROOT / "recipes/run_dapo_qwen72b.sh"), "--cfg", "job"], capture_output=True,
                            text=True, env={**env, "STAGE": "2"}, timeout=120)
    assert "clip_ratio_high: 0.26" in stage2.stdout and "max_turns: 80" in stage2.stdout


def test_the_alternatives_are_one_line_away():
    # DAPO's refill-until-full dynamic sampling instead of dropping without refill
    c = config("swe_dapo_qwen72b", "algorithm.filter_groups.enable=true", "trainer.v1.sampler.custom_sampler.path=null")
    assert c.algorithm.filter_groups.enable and c.trainer.v1.sampler.custom_sampler.path is None
    check(c)
    # verl's token-level TIS, and the overlong options
    check(config("swe_dapo_qwen72b", "algorithm.rollout_correction.rollout_is=token",
                     "swe.agent.overlong.mask_truncated=true", "swe.agent.overlong.soft_penalty_cache_tokens=4096"))


def test_the_tiny_cpu_recipe_keeps_the_algorithm_and_passes_the_preflight(tmp_path):
    from verl_swe.tasks import load_tasks
    from verl_swe.tasks.repos import mini_dir
    from verl_swe.tasks.rl_data import write_rl_parquet

    data = write_rl_parquet(load_tasks(mini_dir() / "tasks.jsonl"), tmp_path / "train.parquet")
    c = config("swe_dapo_tiny_cpu", f"data.train_files={data}", "actor_rollout_ref.model.path=/no/such/model")
    a, r, big = c.actor_rollout_ref.actor, c.actor_rollout_ref.rollout, config("swe_dapo_qwen72b")
    assert a.policy_loss.loss_mode == "swe_dapo" and (a.clip_ratio_low, a.clip_ratio_high) == (0.2, 0.3)
    assert c.trainer.v1.sampler.custom_sampler == big.trainer.v1.sampler.custom_sampler  # same group drop
    assert (r.temperature, r.top_p, r.top_k) == (1.0, 1.0, -1) and c.algorithm == big.algorithm
    # the CPU settings of ../shared/docs/cpu-e2e.md
    assert c.trainer.device == "cpu" and not r.enable_sleep_mode and c.ray_kwargs.ray_init.num_gpus == 1
    assert c.actor_rollout_ref.model.override_config == {"attn_implementation": "sdpa"}  # no YaRN, no flash-attn
    assert c.swe.agent.limits.context_tokens == c.data.max_prompt_length + c.data.max_response_length == r.max_model_len
    check(c)  # enable_sleep_mode is a field of verl's RolloutConfig, not a typo


def test_verls_dataloader_cycles_past_the_pool():
    # total_training_steps above one pass (stage 1: 72 iterations, 24 per pass) relies on verl drawing the next
    # batch from a fresh pass (trainer_base.py _fetch_one_gen_batch), not stopping at the pool's end.
    from types import SimpleNamespace

    from torchdata.stateful_dataloader import StatefulDataLoader
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer
    from verl.utils.dataset.rl_dataset import collate_fn

    rows = [{"raw_prompt": [{"role": "user", "content": str(i)}], "index": i} for i in range(5)]
    trainer = SimpleNamespace(train_dataloader=StatefulDataLoader(rows, batch_size=2, drop_last=True,
                                                                  collate_fn=collate_fn), train_dataloader_it=None)
    drawn = [list(PPOTrainer._fetch_one_gen_batch(trainer)["index"]) for _ in range(5)]
    assert drawn == [[0, 1], [2, 3], [0, 1], [2, 3], [0, 1]]  # 2 batches per pass, 5 iterations


def test_run_paths_become_absolute_for_the_workers(tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    from verl_swe.trainer.run_checks import absolute_run_paths

    monkeypatch.chdir(tmp_path)
    c = config("swe_dapo_qwen7b")  # single node: relative run_root "runs" is allowed, made absolute on the driver
    run_dir = absolute_run_paths(c)
    assert run_dir == tmp_path / "runs" / "qwen7b-stage1" and c.swe.agent.trajectory_dir == str(run_dir)
    [entry] = OmegaConf.load(write_agent_loop_config(c, run_dir))  # what every node's agent-loop worker reads
    assert entry.trajectory_dir == str(run_dir)
