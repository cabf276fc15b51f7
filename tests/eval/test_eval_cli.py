"""`verl-swe eval` end to end: a served model (scripted per episode, vLLM's wire format) on real envs/mini
tasks in real sandboxes, graded; the report's Pass@1 +- SEM and Pass@k, predictions per run, resuming."""

import json
import os
import subprocess
import sys

from verl_swe.agent.oracle import oracle_replies
from verl_swe.testing.episode_server import EpisodeScriptedServer
from verl_swe.testing.tokenizer import qwen_tokenizer
from verl_swe.trainer.model_cards import materialize

PAGER, ROMAN = "verl-swe-mini__pager-1", "verl-swe-mini__roman-1"
GIVE_UP = ["I cannot find the bug.\n```command\nsubmit\n```"]  # submits an empty patch: graded, unresolved


def cli(*args, cache):
    return subprocess.run([sys.executable, "-m", "verl_swe.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=900, env={**os.environ, "VERL_SWE_CACHE": str(cache)})


def test_eval_reports_pass_at_1_over_runs_and_resumes(tmp_path, mini_tasks, task_envs, session_backend):
    tok = qwen_tokenizer()
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(mini_tasks[i].model_dump_json() + "\n" for i in (PAGER, ROMAN)))
    solves = {f"{PAGER}.0", f"{ROMAN}.0", f"{ROMAN}.1"}  # pager: run 0 only; roman: both runs

    def script(episode_id):
        return oracle_replies(mini_tasks[episode_id.rsplit(".", 1)[0]]) if episode_id in solves else GIVE_UP

    out, cache = tmp_path / "run", task_envs.store.cache_dir
    model_dir = materialize("Qwen/Qwen2.5-7B-Instruct", tmp_path / "model")  # its generation_config.json: 0.7, 0.8, 20
    with EpisodeScriptedServer(tok, tok.convert_tokens_to_ids("<|im_end|>"), script) as server:
        args = ["eval", "--instances", tasks, "--endpoint", server.url, "--tokenizer", model_dir,
                "--runs", 2, "--workers", 2, "--out", out, "--backend", session_backend]
        first = cli(*args, cache=cache)  # no --model: read from the server's /v1/models
        assert first.returncode == 0, first.stderr
        n_requests = len(server.requests)
        again = cli(*args, cache=cache)
        assert again.returncode == 0, again.stderr
        assert len(server.requests) == n_requests  # resumed: every episode was already there
    # By default eval samples with the model's own decoding defaults (paper 1.8), sent with every request.
    paper = {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "min_p": 0.0, "repetition_penalty": 1.05}
    assert all({k: r[k] for k in paper} == paper for r in server.requests)
    assert "decoding model-defaults: temperature=0.7" in first.stderr

    report = json.loads((out / "report.json").read_text())
    # Run 0 resolves 2/2 tasks, run 1 resolves 1/2: mean 0.75, SEM = std([1, .5], ddof=1) / sqrt(2) = 0.25.
    assert report["pass@1_per_run"] == [1.0, 0.5]
    assert report["pass@1"] == 0.75 and abs(report["pass@1_sem"] - 0.25) < 1e-12
    assert report["pass@k"]["2"] == 1.0 and report["exit_status"] == {"submitted": 4}
    assert report["per_repo"]["verl-swe-mini/pager"]["pass@1"] == 0.5
    assert report["per_task"][PAGER]["resolved_runs"] == [0]

    # One swebench predictions file per run, with the patch each run submitted (run 1 of pager: nothing).
    run0, run1 = ([json.loads(line) for line in (out / "predictions" / f"run_{r}.jsonl").read_text().splitlines()]
                  for r in (0, 1))
    assert [p["instance_id"] for p in run0] == [PAGER, ROMAN]
    assert all(p["model_name_or_path"] == "scripted" for p in run0 + run1)
    assert "paginator.py" in run0[0]["model_patch"] and run1[0]["model_patch"] == ""
    assert {p.name for p in (out / "plots").iterdir()} >= {"pass_at_k.png", "pass_at_1_runs.png"}
    assert "Pass@1 75.0 +- 25.0" in first.stdout
    assert report["setting"] == {"decoding": paper, "context_tokens": 65_536, "max_turns": 40, "max_new_tokens": 4096}
