"""Training-time `swe/` metrics: per episode from the trajectory, and through verl's seam: the sampler's
metrics dict (real TransferQueue on local Ray), which verl's trainer merges into each step's tracked metrics."""

import pytest
import torch

from verl_swe.eval.metrics import batch_metrics, episode_metrics, mean_metrics
from verl_swe.types import ExitStatus

from tests.eval.conftest import make_trajectory


def test_episode_metrics():
    m = episode_metrics(make_trajectory("a__b-1", 0, True))
    assert m["swe/resolved"] == 1.0 and m["swe/submitted"] == 1.0 and m["swe/exit/submitted"] == 1.0
    assert m["swe/exit/max_turns"] == 0.0 and m["swe/num_turns"] == 3.0 and m["swe/format_error_turns"] == 1.0
    assert m["swe/tool/bash"] == 1.0 and m["swe/tool/submit"] == 1.0  # the format-error turn called nothing
    assert m["swe/tokens_per_turn"] == (31 + 5 + 8) / 3 and m["swe/context_tokens"] == 170.0
    lost = episode_metrics(make_trajectory("a__b-1", 1, False, ExitStatus.CONTEXT_EXHAUSTED))
    assert lost["swe/submitted"] == 0.0 and lost["swe/exit/context_exhausted"] == 1.0


def test_batch_means_count_an_unused_tool_as_zero():
    means = mean_metrics([{"swe/tool/open": 2.0, "swe/num_turns": 4.0}, {"swe/num_turns": 6.0}])
    assert means == {"swe/tool/open": 1.0, "swe/num_turns": 5.0}
    out = batch_metrics([{"swe/resolved": 1.0}, {"swe/resolved": 0.0}], groups_kept=1, groups_total=4)
    assert out == {"swe/resolved": 0.5, "swe/episodes": 2.0, "swe/groups_kept": 1.0, "swe/groups_kept_frac": 0.25}


@pytest.mark.ray
def test_the_sampler_logs_swe_metrics_of_every_sampled_rollout(transfer_queue):
    import transfer_queue as tq
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    from tests.trainer.test_sampler import build_sampler

    def put(uid, resolved):
        """A finished group as verl's AgentLoopWorkerTQ stores SWEAgentLoop's outputs, extra_fields included."""
        keys, fields, tags = [], [], []
        for session, ok in enumerate(resolved):
            traj = make_trajectory(uid, session, ok, ExitStatus.SUBMITTED if ok else ExitStatus.MAX_TURNS)
            rm = torch.zeros(3)
            rm[-1] = float(ok)
            keys.append(f"{uid}_{session}_0")
            fields.append(dict(prompts=torch.arange(1, 4), responses=torch.arange(10, 13), rm_scores=rm,
                               input_ids=torch.arange(6), attention_mask=torch.ones(6, dtype=torch.int64),
                               position_ids=torch.arange(6), response_mask=torch.ones(3, dtype=torch.int64), uid=uid,
                               extra_fields={"reward_extra_info": {"resolved": float(ok)},
                                             "swe_metrics": episode_metrics(traj)}))
            tags.append(dict(status="success", prompt_len=3, response_len=3, seq_len=6, global_steps=1,
                             min_global_steps=1, max_global_steps=1))
        tq.kv_batch_put(keys=keys, partition_id="train", fields=list_of_dict_to_tensordict(fields), tags=tags)
        tq.kv_put(key=uid, partition_id="train", tag={"is_prompt": True, "status": "finished", "global_steps": 1})

    put("g0", [True, False, False, False])  # kept
    put("g1", [False] * 4)  # dropped: no signal, but its rollouts still describe the policy
    batch, metrics = build_sampler(lambda n: pytest.fail("no refill")).sample(1, "train", 2)
    assert {k.split("_")[0] for k in batch.keys} == {"g0"}
    assert metrics["swe/episodes"] == 8.0 and metrics["swe/resolved"] == 1 / 8
    assert metrics["swe/exit/max_turns"] == 7 / 8 and metrics["swe/submitted"] == 1 / 8
    assert metrics["swe/groups_kept"] == 1.0 and metrics["swe/groups_kept_frac"] == 0.5
    assert metrics["swe/tool/bash"] == 1.0 and metrics["swe/num_turns"] == 3.0
    tq.kv_clear(keys=batch.keys, partition_id="train")


@pytest.fixture(scope="module")
def transfer_queue():
    from tests.trainer.test_sampler import transfer_queue as fixture

    yield from fixture.__wrapped__()
