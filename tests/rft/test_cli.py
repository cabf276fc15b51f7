"""`verl-swe rft collect` then `verl-swe rft build`, as a user runs them, against a scripted
OpenAI-compatible server (vLLM's wire format) on a real envs/mini task in a real sandbox."""

import json
import os
import subprocess
import sys

import pandas as pd

from tests.agent.test_swe_agent import ORACLE, PAGER
from verl_swe.rft.demo import DEMO_OPEN
from verl_swe.testing.openai_server import ScriptedCompletionsServer
from verl_swe.testing.tokenizer import qwen_tokenizer, qwen_tokenizer_dir


def cli(*args, cache=None):
    env = {**os.environ, **({"VERL_SWE_CACHE": str(cache)} if cache else {})}
    return subprocess.run([sys.executable, "-m", "verl_swe.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600, env=env)


def test_collect_with_a_demo_resumes_and_builds_without_it(tmp_path, mini_tasks, task_envs, session_backend):
    tok = qwen_tokenizer()
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(mini_tasks[PAGER].model_dump_json() + "\n")
    demo = tmp_path / "demo.txt"
    demo.write_text("[TASK]\nis_prime(1) returns True.\n\n[RESPONSE]\nFixed.\n```command\nsubmit\n```\n")
    out, cache = tmp_path / "run", task_envs.store.cache_dir
    with ScriptedCompletionsServer(tok, tok.convert_tokens_to_ids("<|im_end|>"), ORACLE) as server:
        args = ["rft", "collect", "--instances", tasks, "--endpoint", server.url, "--model", qwen_tokenizer_dir(),
                "--out", out, "--backend", session_backend, "--workers", 2, "--demo", demo]
        first = cli(*args, "--n", 2, cache=cache)
        assert first.returncode == 0, first.stderr
        again = cli(*args, "--n", 3, cache=cache)
        assert again.returncode == 0, again.stderr
        sent = list(server.requests)
        other = demo.with_name("other.txt")
        other.write_text("another demonstration")
        refused = cli(*args[:-1], other, "--n", 4, cache=cache)
    assert len(sent) == 3 * len(ORACLE)  # 2 episodes, then only the missing third
    assert all("is_prime(1) returns True." in tok.decode(r["prompt"]) for r in sent)
    assert refused.returncode == 2 and "another demonstration" in refused.stderr
    assert len(list((out / "trajectories" / PAGER).iterdir())) == 3

    sft = tmp_path / "sft.parquet"
    r = cli("rft", "build", out, tmp_path / "no-such-run", "--out", sft, "--tokenizer", qwen_tokenizer_dir())
    assert r.returncode == 0, r.stderr
    report = json.loads((tmp_path / "sft.report.json").read_text())
    # the scripted model plays the same turns every time: one kept, two duplicates
    assert (report["episodes"], report["resolved"], report["kept"]) == (3, 3, 1)
    assert report["excluded"] == {"duplicate": 2} and report["demo_stripped"] == 1
    assert "kept" in r.stdout and str(sft) in r.stdout
    [row] = pd.read_parquet(sft).to_dict("records")
    assert DEMO_OPEN not in row["messages"][0]["content"] and "is_prime" not in json.dumps(list(row["messages"]))
    assert list(row["assistant_loss_mask"]) == [1] * len(ORACLE)


def test_build_with_nothing_resolved_exits_1_and_says_why(tmp_path):
    r = cli("rft", "build", tmp_path / "empty-run", "--out", tmp_path / "sft.parquet", "--tokenizer",
            qwen_tokenizer_dir())
    assert r.returncode == 1 and "no trajectory kept from 0 files" in r.stderr
    assert not (tmp_path / "sft.parquet").exists() and (tmp_path / "sft.report.json").is_file()
