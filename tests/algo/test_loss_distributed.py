"""Eq. 8's normalizer across data-parallel ranks and micro-batches: 2 gloo ranks x 2 micro-batches each,
with gradients averaged over ranks as FSDP/DDP do, give exactly the single-batch gradient of Eq. 8."""

import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from verl_swe.algo.loss import dapo_token_loss

N, T, D, V = 8, 6, 4, 5
EPS_LOW, EPS_HIGH = 0.2, 0.3


def batch():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, T, D, generator=g)
    tokens = torch.randint(0, V, (N, T), generator=g)
    mask = (torch.rand(N, T, generator=g) > 0.4).long()
    mask[2] = 0  # a trajectory with no action tokens at all
    mask[5, :] = 1  # and a long one: per-rank token counts differ
    adv = torch.randn(N, generator=g).unsqueeze(-1).expand(N, T).contiguous()
    w0 = torch.randn(D, V, generator=g)
    old = logprobs(w0, x, tokens).detach() + 0.3 * torch.randn(N, T, generator=g)  # off-policy enough to clip
    return x, tokens, mask, adv, w0, old


def logprobs(w, x, tokens):
    return torch.log_softmax(x @ w, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def eq8_reference_grad():
    """Eq. 8 written out on the whole mini-batch in one process."""
    x, tokens, mask, adv, w0, old = batch()
    w = w0.clone().requires_grad_()
    rho = torch.exp(logprobs(w, x, tokens) - old)
    obj = torch.minimum(rho * adv, torch.clamp(rho, 1 - EPS_LOW, 1 + EPS_HIGH) * adv)
    loss = -(obj * mask).sum() / mask.sum()
    loss.backward()
    return w.grad


def worker(rank: int, world: int, port: int, out_path: str):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    x, tokens, mask, adv, w0, old = batch()
    shard = slice(rank * N // world, (rank + 1) * N // world)
    x, tokens, mask, adv, old = x[shard], tokens[shard], mask[shard], adv[shard], old[shard]
    num_tokens = mask.sum().float()
    dist.all_reduce(num_tokens)  # what verl's engine does per mini-batch before splitting micro-batches
    w = w0.clone().requires_grad_()
    for micro in (slice(0, 2), slice(2, 4)):  # gradient accumulation: micro-batch losses add up
        loss, _ = dapo_token_loss(old[micro], logprobs(w, x[micro], tokens[micro]), adv[micro], mask[micro],
                                  EPS_LOW, EPS_HIGH, batch_num_tokens=num_tokens.item(), dp_size=world)
        loss.backward()
    dist.all_reduce(w.grad)
    w.grad /= world  # data-parallel gradient averaging
    if rank == 0:
        torch.save(w.grad, out_path)
    dist.destroy_process_group()


def test_two_ranks_and_micro_batches_give_the_single_batch_gradient(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = str(tmp_path / "grad.pt")
    mp.spawn(worker, args=(2, port, out), nprocs=2, join=True)
    distributed = torch.load(out)
    reference = eq8_reference_grad()
    assert reference.abs().sum() > 0
    torch.testing.assert_close(distributed, reference, rtol=1e-5, atol=1e-6)
