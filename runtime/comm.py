"""Communication ops of expert and tensor parallelism on torch.distributed, one process per rank:
EP dispatch and combine (all-to-all with DeepSeek-style top-k routing, skewed expert popularity,
bf16 or fp8 payloads), TP all-reduce and all-gather, and a KV-cache transfer between two ranks.

NCCL on GPUs (the launcher sets NCCL_NVLS_ENABLE=0: no NVLink multicast), gloo on the CPU, where
the tests check every op against a single-process reference. Dispatch sends a token once per
destination rank, however many of its experts live there (DeepEP's node dedup, per rank), with
its weights for that rank's experts; combine returns each rank's weighted partial sum and adds them.
What this does not do: overlap with compute, low-latency (RDMA-direct) kernels, or EP over nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

FP8 = torch.float8_e4m3fn


def route(tokens: int, experts: int, topk: int, skew: float, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k experts per token and their weights. Expert popularity is log-normal with sigma `skew`
    (0: uniform), so hot experts draw more tokens, as real routers do; weights are softmax-normed."""
    pop = torch.exp(skew * torch.randn(experts, generator=gen))
    ids = torch.multinomial(pop.expand(tokens, experts), topk, replacement=False, generator=gen)
    w = torch.softmax(torch.randn(tokens, topk, generator=gen), dim=-1)
    return ids, w


def load_imbalance(ids: torch.Tensor, experts: int) -> float:
    """Max over mean tokens per expert, the figure the step model's ep_imbalance stands for."""
    counts = torch.bincount(ids.flatten(), minlength=experts).float()
    return float(counts.max() / counts.mean())


def _a2a(
    out: torch.Tensor,
    inp: torch.Tensor,
    out_splits: list[int],
    in_splits: list[int],
    group: dist.ProcessGroup | None = None,
) -> None:
    """all_to_all_single on any dtype: 16- and 8-bit floats travel as bytes (bit-exact; gloo has
    no bf16 or fp8), split along rows as given."""
    if inp.dtype in (torch.bfloat16, torch.float16, FP8):
        out, inp = out.view(torch.uint8), inp.contiguous().view(torch.uint8)
    dist.all_to_all_single(out, inp.contiguous(), out_splits, in_splits, group=group)


@dataclass
class Dispatched:
    """What a rank received: token rows, and per row the weights of this rank's local experts."""

    x: torch.Tensor  # [rows, hidden] in the compute dtype
    local_w: torch.Tensor  # [rows, local experts] weight of each local expert for the row (0: not routed)
    send_token: torch.Tensor  # [pairs] source token of each (token, destination rank) pair, in send order
    send_splits: list[int]
    recv_splits: list[int]


def dispatch(
    x: torch.Tensor,
    ids: torch.Tensor,
    w: torch.Tensor,
    experts: int,
    fp8: bool = False,
    group: dist.ProcessGroup | None = None,
) -> Dispatched:
    """Send each token to every rank that holds one of its experts (experts split contiguously)."""
    world, dev = dist.get_world_size(group), x.device
    per = experts // world
    ids, w = ids.to(dev), w.to(dev)
    dest = ids // per  # [tokens, topk] destination rank of each choice
    hit = torch.zeros(world, x.shape[0], dtype=torch.bool, device=dev)
    hit[dest, torch.arange(x.shape[0], device=dev)[:, None].expand_as(dest)] = True
    pair_rank, pair_tok = hit.nonzero(as_tuple=True)  # grouped by destination rank
    send_splits = torch.bincount(pair_rank, minlength=world).tolist()
    counts = torch.tensor(send_splits, dtype=torch.int64, device=dev)
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts, group=group)
    recv_splits = recv_counts.tolist()
    rows = sum(recv_splits)
    # per pair, the weights of the destination's experts (dense over its `per` local experts)
    lw = torch.zeros(len(pair_tok), per, dtype=torch.float32, device=dev)
    for k in range(ids.shape[1]):
        e, r = ids[pair_tok, k], dest[pair_tok, k]
        mine = r == pair_rank
        lw[mine, e[mine] - r[mine] * per] += w[pair_tok, k][mine].float()
    recv_w = torch.empty(rows, per, dtype=torch.float32, device=dev)
    _a2a(recv_w, lw, recv_splits, send_splits, group)
    payload = x[pair_tok]
    if fp8:
        scale = payload.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-8) / 448.0
        q = (payload.float() / scale).to(FP8)
        recv_q = torch.empty(rows, x.shape[1], dtype=FP8, device=dev)
        recv_s = torch.empty(rows, 1, dtype=torch.float32, device=dev)
        _a2a(recv_q, q, recv_splits, send_splits, group)
        _a2a(recv_s, scale, recv_splits, send_splits, group)
        recv_x = (recv_q.float() * recv_s).to(x.dtype)
    else:
        recv_x = torch.empty(rows, x.shape[1], dtype=x.dtype, device=dev)
        _a2a(recv_x, payload, recv_splits, send_splits, group)
    return Dispatched(recv_x, recv_w, pair_tok, send_splits, recv_splits)


def combine(y: torch.Tensor, d: Dispatched, tokens: int, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """Return each received row's weighted expert output to its token and sum over ranks."""
    back = torch.empty(len(d.send_token), y.shape[1], dtype=y.dtype, device=y.device)
    _a2a(back, y, d.send_splits, d.recv_splits, group)
    out = torch.zeros(tokens, y.shape[1], dtype=torch.float32, device=y.device)
    return out.index_add_(0, d.send_token, back.float()).to(y.dtype)


def all_reduce(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    dist.all_reduce(x, group=group)
    return x


def all_gather(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    out = torch.empty(dist.get_world_size(group) * x.shape[0], *x.shape[1:], dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(out, x.contiguous(), group=group)
    return out


def kv_transfer(kv: torch.Tensor, src: int, dst: int) -> torch.Tensor:
    """Move a KV block (any shape) from rank `src` to rank `dst`, as a disaggregated prefill hands
    a finished prompt's cache to its decode instance; returns what `dst` holds afterwards."""
    rank = dist.get_rank()
    if rank == src:
        dist.send(kv.contiguous(), dst)
    elif rank == dst:
        dist.recv(kv, src)
    return kv
