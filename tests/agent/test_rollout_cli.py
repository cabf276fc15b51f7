"""`verl-swe rollout` against an OpenAI-compatible server (a scripted one: same wire format as vLLM),
resuming a run directory, and its predictions graded by `verl-swe evaluate`."""

import json
import os
import subprocess
import sys

from verl_swe.agent.rollout import pass_at_k
from verl_swe.testing.openai_server import ScriptedCompletionsServer
from verl_swe.testing.tokenizer import qwen_tokenizer, qwen_tokenizer_dir
from tests.agent.test_swe_agent import ORACLE, PAGER


def cli(*args, cache):
    return subprocess.run([sys.executable, "-m", "verl_swe.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "VERL_SWE_CACHE": str(cache)})


def test_pass_at_k():
    assert pass_at_k(10, 0, 1) == 0.0 and pass_at_k(10, 10, 5) == 1.0
    assert pass_at_k(4, 1, 1) == 0.25 and abs(pass_at_k(4, 1, 2) - 0.5) < 1e-12  # 1 - C(3,2)/C(4,2)


def test_rollout_resumes_and_its_predictions_grade(tmp_path, mini_tasks, task_envs, session_backend):
    tok = qwen_tokenizer()
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(mini_tasks[PAGER].model_dump_json() + "\n")
    out, cache = tmp_path / "run", task_envs.store.cache_dir
    with ScriptedCompletionsServer(tok, tok.convert_tokens_to_ids("<|im_end|>"), ORACLE) as server:
        args = ["rollout", "--instances", tasks, "--endpoint", server.url, "--model", qwen_tokenizer_dir(),
                "--out", out, "--backend", session_backend, "--workers", 2]
        first = cli(*args, "--n", 2, cache=cache)
        assert first.returncode == 0, first.stderr
        again = cli(*args, "--n", 3, cache=cache)
        assert again.returncode == 0, again.stderr
        sent = server.requests
    assert len(sent) == 3 * len(ORACLE)  # 2 episodes, then only the missing third
    assert all(isinstance(r["prompt"][0], int) and r["top_k"] == -1 and r["min_p"] == 0.0 for r in sent)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 3 and summary["pass@1"] == 1.0 and summary["per_task"][PAGER]["resolved"] == 3
    episodes = sorted(p.name for p in (out / "trajectories" / PAGER).iterdir())
    assert episodes == [f"{PAGER}.{i}.json" for i in range(3)]
    report = tmp_path / "report.json"
    r = cli("evaluate", "--instances", tasks, "--predictions", out / "predictions.jsonl", "--backend", session_backend,
            "--output", report, cache=cache)
    assert r.returncode == 0 and json.loads(report.read_text())["summary"]["resolved"] == 1


def test_rollout_wall_clock_per_episode(tmp_path, mini_tasks, task_envs, session_backend):
    # --timeout-s bounds each episode: a model that only ever sleeps ends with exit_status timeout.
    tok = qwen_tokenizer()
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(mini_tasks[PAGER].model_dump_json() + "\n")
    out = tmp_path / "run"
    with ScriptedCompletionsServer(tok, tok.convert_tokens_to_ids("<|im_end|>"), ["```command\nsleep 1\n```"]) as server:
        r = cli("rollout", "--instances", tasks, "--endpoint", server.url, "--model", qwen_tokenizer_dir(), "--out", out,
                "--backend", session_backend, "--timeout-s", 2.5, cache=task_envs.store.cache_dir)
    assert r.returncode == 0, r.stderr
    [traj] = [json.loads(p.read_text()) for p in (out / "trajectories" / PAGER).iterdir()]
    # (the clock includes preparing the environment: a first local build may use it all before turn 1)
    assert traj["exit_status"] == "timeout" and traj["reward"] == 0.0 and traj["num_turns"] <= 3
    assert traj["metadata"]["limits"]["timeout_s"] == 2.5


def test_a_failed_model_server_stops_the_run_and_a_rerun_finishes_it(tmp_path, mini_tasks, task_envs,
                                                                     session_backend):
    # Episodes the server failed are not saved as the agent's failures: the run stops saying so (exit 1)
    # and the same command, once the server is back, runs exactly them.
    class DiesAfterOneEpisode(ScriptedCompletionsServer):
        def reply(self, request_id, body):
            if len(self.requests) > len(ORACLE):
                raise ConnectionAbortedError("the server went down")  # the client sees the connection drop
            return super().reply(request_id, body)

    tok, eot = qwen_tokenizer(), qwen_tokenizer().convert_tokens_to_ids("<|im_end|>")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(mini_tasks[PAGER].model_dump_json() + "\n")
    out, cache = tmp_path / "run", task_envs.store.cache_dir
    args = ["rollout", "--instances", tasks, "--model", qwen_tokenizer_dir(), "--out", out, "--n", 2,
            "--backend", session_backend, "--workers", 1]
    with DiesAfterOneEpisode(tok, eot, ORACLE) as server:
        failed = cli(*args, "--endpoint", server.url, cache=cache)
    assert failed.returncode == 1 and "the model failed" in failed.stderr, failed.stderr
    assert "rerun the same command" in failed.stderr
    assert [p.name for p in (out / "trajectories" / PAGER).iterdir()] == [f"{PAGER}.0.json"]
    with ScriptedCompletionsServer(tok, eot, ORACLE) as server:
        again = cli(*args, "--endpoint", server.url, cache=cache)
        assert again.returncode == 0, again.stderr
        assert len(server.requests) == len(ORACLE)  # only the episode that was lost
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 2 and summary["per_task"][PAGER]["exit_status"] == {"submitted": 2}
