"""The SFT trainer sees exactly the token ids the RL rollout produced for a trajectory (same template,
same rendering), with the real Qwen tokenizer; only well-formed turns carry loss (P1 Sec. 4.2, Fig. 2);
the collection demonstration never reaches the training data."""

import pytest
from omegaconf import OmegaConf

from tests.rft.episodes import default_system, play, script
from verl_swe.rft.build import NothingToTrain, build_sft_data
from verl_swe.rft.dataset import TrajectorySFTDataset
from verl_swe.rft.demo import DEMO_OPEN, with_demo
from verl_swe.testing.tokenizer import qwen_tokenizer


def dataset(parquet, **data):
    config = OmegaConf.create({"max_length": 100_000, "truncation": "error", "pad_mode": "no_padding", **data})
    return TrajectorySFTDataset(str(parquet), qwen_tokenizer(), config)


def expected_sft_mask(res) -> list[int]:
    """The rollout's mask (1 = generated), with the generated tokens of format-error turns set to 0.
    Turn k's tokens are the k-th run of 1s in the rollout's response mask."""
    mask, run, prev = [], -1, 0
    for m in res.response_mask:
        if m and not prev:
            run += 1
        mask.append(int(m and not res.trajectory.turns[run].format_error))
        prev = m
    return [0] * len(res.prompt_ids) + mask


@pytest.mark.parametrize("tool_set", ["paper", "native"])
async def test_sft_ids_are_the_rollout_ids_and_format_errors_carry_no_loss(tmp_path, tool_set):
    res = await play(script(tool_set, format_errors_at=(1, 3), turns=7), tool_set=tool_set, run_dir=tmp_path / "run")
    t = res.trajectory
    assert [turn.format_error for turn in t.turns] == [False, True, False, True, False, False, False]

    report = build_sft_data([tmp_path / "run"], tmp_path / "sft.parquet", qwen_tokenizer(), max_tokens=100_000)
    assert report.kept == 1 and report.turns == {"assistant": 7, "format_error_masked": 2}
    item = dataset(tmp_path / "sft.parquet")[0]

    assert item["input_ids"].tolist() == res.prompt_ids + res.response_ids
    assert item["loss_mask"].tolist() == expected_sft_mask(res)
    assert item["position_ids"].tolist() == list(range(len(res.prompt_ids) + len(res.response_ids)))
    # The malformed turns are still in the context the later turns were trained on.
    tok = qwen_tokenizer()
    text = tok.decode(item["input_ids"].tolist())
    assert all(turn.assistant in text for turn in t.turns)
    trained = tok.decode([i for i, m in zip(item["input_ids"].tolist(), item["loss_mask"].tolist()) if m])
    assert "forget the command block" not in trained and "submit" in trained
    assert report.tokens["trained"] == sum(item["loss_mask"].tolist())


async def test_the_demonstration_is_in_collection_only(tmp_path):
    replies = script("paper", format_errors_at=(), turns=3)
    demo = "[TASK]\nFix is_prime(1).\n\n[RESPONSE]\n```command\nsubmit\n```"
    collected = await play(replies, system=with_demo(default_system("paper"), demo), run_dir=tmp_path / "run")
    rl = await play(replies)  # the same episode as the RL agent plays it: no demonstration
    assert demo in qwen_tokenizer().decode(collected.prompt_ids)

    report = build_sft_data([tmp_path / "run"], tmp_path / "sft.parquet", qwen_tokenizer(), max_tokens=100_000)
    assert report.demo_stripped == 1
    ds = dataset(tmp_path / "sft.parquet")
    assert ds.messages[0][0]["content"] == default_system("paper") and DEMO_OPEN not in str(ds.messages[0])
    assert ds[0]["input_ids"].tolist() == rl.prompt_ids + rl.response_ids


def non_canonical_reply(tok) -> list[int]:
    """A well-formed reply whose ids spell " hello" as " hel" + "lo": text the tokenizer encodes otherwise."""
    split = tok.encode(" hel", add_special_tokens=False) + tok.encode("lo", add_special_tokens=False)
    assert tok.decode(split) == " hello" and len(tok.encode(" hello", add_special_tokens=False)) == 1
    ids = tok.encode("I will say", add_special_tokens=False) + split + \
        tok.encode(" and look.\n```command\nls -la\n```", add_special_tokens=False)
    assert tok.encode(tok.decode(ids), add_special_tokens=False) != ids  # a re-encoding would not give these ids
    return ids


async def test_sft_trains_on_the_ids_the_policy_sampled_not_a_reencoding(tmp_path):
    tok = qwen_tokenizer()
    sampled = non_canonical_reply(tok)
    res = await play([sampled, script("paper", (), 2)[-1]], run_dir=tmp_path / "run")
    assert res.trajectory.turns[0].token_ids == sampled + [tok.convert_tokens_to_ids("<|im_end|>")]

    report = build_sft_data([tmp_path / "run"], tmp_path / "sft.parquet", tok, max_tokens=100_000)
    assert report.token_ids == {"sampled": 1, "reencoded": 0, "reencoding_differs": 1, "turns_differ": 1}
    item = dataset(tmp_path / "sft.parquet")[0]
    assert item["input_ids"].tolist() == res.prompt_ids + res.response_ids  # the rollout's ids, the split kept
    assert item["loss_mask"].tolist() == expected_sft_mask(res)


async def test_a_trajectory_without_ids_is_reencoded_and_one_whose_ids_do_not_spell_its_text_is_excluded(tmp_path):
    import json

    tok = qwen_tokenizer()
    res = await play([non_canonical_reply(tok), script("paper", (), 2)[-1]], run_dir=tmp_path / "run")
    [path] = (tmp_path / "run" / "trajectories").glob("*/*.json")
    doc = json.loads(path.read_text())
    for turn in doc["turns"]:
        turn.pop("token_ids")  # as trajectories saved before the ids were recorded
    path.write_text(json.dumps(doc))
    report = build_sft_data([tmp_path / "run"], tmp_path / "old.parquet", tok, max_tokens=100_000)
    assert report.token_ids == {"sampled": 0, "reencoded": 1, "reencoding_differs": 0, "turns_differ": 0}
    ids = dataset(tmp_path / "old.parquet")[0]["input_ids"].tolist()
    assert ids != res.prompt_ids + res.response_ids and tok.decode(ids) == tok.decode(res.prompt_ids + res.response_ids)

    doc["turns"][0]["token_ids"] = tok.encode("something else", add_special_tokens=False)
    path.write_text(json.dumps(doc))
    with pytest.raises(NothingToTrain):
        build_sft_data([tmp_path / "run"], tmp_path / "bad.parquet", tok, max_tokens=100_000)
    problems = json.loads((tmp_path / "bad.report.json").read_text())["problems"]
    assert [p["reason"] for p in problems] == ["bad_structure"] and "do not decode" in problems[0]["message"]
