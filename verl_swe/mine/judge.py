"""An LLM's judgement of a task's quality, as SWE-rebench scores it, for rows that have none.

Any OpenAI-compatible chat endpoint (a vLLM server, a hosted model) scores three things from 0 (best) to 3
(worst), SWE-rebench's `meta.llm_score` sub-scores that the curation's quality rule reads (P1 Sec. 4.1, the
fourth criterion): how clear the issue is (`issue_text_score`), how hard the task is (`difficulty_score`), how
valid the tests are for the issue (`test_score`). The model's reasoning is kept beside the scores. Answers are
cached by row and prompt; a failed request or an unparseable answer is said on the row (`meta.llm_score_error`)
and the row is left unscored, never given a guessed score.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import httpx

from verl_swe.files import write_json_atomic

SCORES = ("issue_text_score", "difficulty_score", "test_score")
PROMPT = """You review a software-engineering task made from a repository's history: an issue, the fix that resolved \
it, and the tests that check the fix. Score it as SWE-rebench does, each from 0 (best) to 3 (worst):
- issue_text_score: is the issue clear enough to know what a correct fix must do? 0 well specified, 1 some gaps \
but a sensible reading exists, 2 vague, 3 impossible to know what is asked.
- difficulty_score: how long would an experienced engineer need? 0 under 15 minutes, 1 15 minutes to an hour, \
2 one to four hours, 3 more than four hours.
- test_score: do the tests check the issue's behaviour, and would they accept other correct fixes? 0 yes, 1 mostly, \
2 they test details the issue does not state, 3 they check something else or reject correct fixes.

Answer with one JSON object and nothing else: {{"reasoning": "<why, in a few sentences>", "issue_text_score": N, \
"difficulty_score": N, "test_score": N}}

<issue>
{statement}
</issue>

<fix>
{patch}
</fix>

<tests>
{test_patch}
</tests>
"""
MAX_PART_CHARS = 12_000  # each part of the prompt, so a huge diff cannot crowd out the rest


@dataclass(frozen=True)
class JudgeConfig:
    url: str  # an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1
    model: str
    cache_dir: Path
    api_key: str | None = None
    timeout_s: float = 300.0
    max_tokens: int = 1024


def prompt_for(row: dict) -> str:
    cut = lambda s: s if len(s) <= MAX_PART_CHARS else s[:MAX_PART_CHARS] + "\n[... cut ...]"  # noqa: E731
    return PROMPT.format(statement=cut(row["problem_statement"]), patch=cut(row["patch"]),
                         test_patch=cut(row["test_patch"]))


def parse_answer(text: str) -> dict:
    """The scores and reasoning in a model's answer; ValueError saying what is wrong with it."""
    match = re.search(r"\{.*\}", text, re.S)
    if not match:
        raise ValueError(f"no JSON object in the answer: {text[:200]!r}")
    try:
        answer = json.loads(match.group(0))
    except json.JSONDecodeError as e:
        raise ValueError(f"the answer's JSON does not parse ({e}): {match.group(0)[:200]!r}") from None
    scores = {}
    for name in SCORES:
        value = answer.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 3:
            raise ValueError(f"{name} must be a number from 0 to 3, got {value!r}")
        scores[name] = float(value)
    return {**scores, "reasoning": str(answer.get("reasoning", ""))}


async def judge(row: dict, cfg: JudgeConfig, client: httpx.AsyncClient) -> tuple[dict | None, str | None]:
    """(meta.llm_score, None) or (None, why it could not be scored). Cached by model, row and prompt."""
    prompt = prompt_for(row)
    key = hashlib.sha256(f"{cfg.model}\n{row['instance_id']}\n{prompt}".encode()).hexdigest()[:24]
    cached = Path(cfg.cache_dir) / f"{key}.json"
    if cached.exists():
        entry = json.loads(cached.read_text())
        return entry.get("score"), entry.get("error")
    url = cfg.url.rstrip("/") + ("/chat/completions" if cfg.url.rstrip("/").endswith("/v1") else "/v1/chat/completions")
    body = {"model": cfg.model, "messages": [{"role": "user", "content": prompt}], "temperature": 0.0,
            "max_tokens": cfg.max_tokens}
    headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
    try:
        r = await client.post(url, json=body, headers=headers, timeout=cfg.timeout_s)
        r.raise_for_status()
        text = r.json()["choices"][0]["message"]["content"] or ""
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as e:
        return None, f"the judge at {url} failed: {type(e).__name__}: {str(e)[:300]}"  # not cached: retry next run
    try:
        score, error = {**parse_answer(text), "model": cfg.model}, None
    except ValueError as e:
        score, error = None, f"the judge's answer could not be read: {e}"
    write_json_atomic(cached, {"score": score, "error": error, "answer": text})
    return score, error
