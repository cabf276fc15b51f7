"""Rollouts that failed for an infrastructure reason leave their group before its advantages are computed.

verl returns every AgentLoopOutput, so `SWEAgentLoop` returns an infrastructure failure too, marked in
`extra_fields["infra_failure"]` (its kind; verl_swe/agent/infra.py), with a zero mask and reward. Left in the
batch, its reward would still enter its group's mean and std (verl's GRPO, P1 Eq. 2) and shift its
siblings' advantages as if the model had failed. The sampler therefore clears those rows from
TransferQueue first: the group's advantage is then computed over the rollouts the model did produce, and a
group left with fewer than `min_group` of them (default 2: one rollout has no group baseline) is dropped.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict

import transfer_queue as tq
from transfer_queue import KVBatchMeta

logger = logging.getLogger(__name__)


def infra_failed_sessions(batch: KVBatchMeta) -> tuple[dict[str, set[str]], dict[tuple[str, str], str]]:
    """(uid -> its session ids, (uid, session) -> infra kind of the failed ones), read from `extra_fields`."""
    sessions: dict[str, set[str]] = defaultdict(set)
    failed: dict[tuple[str, str], str] = {}
    if not batch.keys:
        return sessions, failed
    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
    extras = list(data["extra_fields"]) if "extra_fields" in data.keys() else [None] * len(batch.keys)
    for key, extra in zip(batch.keys, extras, strict=True):
        uid, session, _ = key.rsplit("_", 2)  # `{uid}_{session_id}_{index}` (verl's replay_buffer.py)
        sessions[uid].add(session)
        extra = getattr(extra, "data", extra)
        kind = extra.get("infra_failure") if isinstance(extra, dict) else None
        if kind:
            failed[uid, session] = str(kind)
    return sessions, failed


def exclude_infra_failures(batch: KVBatchMeta, stats: Counter, min_group: int = 2) -> KVBatchMeta:
    """`batch` without its infrastructure failures (and without the groups they leave under `min_group`);
    the removed rows are cleared from TransferQueue. Counts go to `stats`: infra_excluded (rollouts) and
    infra_groups_dropped."""
    sessions, failed = infra_failed_sessions(batch)
    if not failed:
        return batch
    short = {uid for uid, members in sessions.items()
             if any((uid, s) in failed for s in members) and sum((uid, s) not in failed for s in members) < min_group}
    gone = [k for k in batch.keys if tuple(k.rsplit("_", 2)[:2]) in failed or k.rsplit("_", 2)[0] in short]
    tq.kv_clear(keys=gone, partition_id=batch.partition_id)  # fit() clears only the keys it gets back
    stats["infra_excluded"] += len(failed)
    stats["infra_groups_dropped"] += len(short)
    logger.warning("excluded %d infrastructure-failed rollouts from their groups (%s); dropped %d groups left "
                   "with fewer than %d", len(failed), dict(Counter(failed.values())), len(short), min_group)
    gone_set = set(gone)
    kept = [(k, t) for k, t in zip(batch.keys, batch.tags, strict=True) if k not in gone_set]
    return KVBatchMeta(keys=[k for k, _ in kept], tags=[t for _, t in kept], partition_id=batch.partition_id,
                       fields=batch.fields, extra_info=batch.extra_info)


def infra_batch_metrics(stats: Counter, prefix: str = "swe/infra") -> dict[str, float]:
    """What the step logs about it: `swe/infra/excluded`, `swe/infra/groups_dropped`."""
    return {f"{prefix}/excluded": float(stats["infra_excluded"]),
            f"{prefix}/groups_dropped": float(stats["infra_groups_dropped"])}


def validation_without_infra_failures(data_sources: list, sample_uids: list, infos: dict[str, list],
                                      turns: list, expected_counts: dict | None = None):
    """Validation's samples without their infrastructure failures (reward_extra_info `infra_failure`, set by
    `SWEAgentLoop`), so that `val-core/*` scores the episodes that ran, as training's advantages do; and
    `val/infra/*`: how many failed so, by kind. Returns (data_sources, uids, infos, turns, expected_counts,
    metrics)."""
    kinds = [str(k or "") for k in infos.get("infra_failure", [""] * len(data_sources))]
    keep = [i for i, kind in enumerate(kinds) if not kind]
    failed = Counter(kind for kind in kinds if kind)
    metrics = {"val/infra/failed": float(sum(failed.values())), "val/infra/episodes_scored": float(len(keep)),
               **{f"val/infra/{kind}": float(n) for kind, n in failed.items()}}
    if not failed:
        return data_sources, sample_uids, infos, turns, expected_counts, metrics
    logger.warning("validation: %d episodes failed for the infrastructure's reason (%s) and are left out of its "
                   "scores; %d scored", sum(failed.values()), dict(failed), len(keep))
    expected = dict(expected_counts or {})
    for i, kind in enumerate(kinds):
        key = (str(data_sources[i]), str(sample_uids[i]))
        if kind and key in expected:
            expected[key] -= 1
    expected = {k: n for k, n in expected.items() if n > 0}
    pick = lambda values: [values[i] for i in keep]  # noqa: E731
    return (pick(data_sources), pick(sample_uids), {k: pick(v) for k, v in infos.items()},
            pick(turns) if len(turns) == len(kinds) else turns, expected, metrics)
