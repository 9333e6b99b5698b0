"""Communication ops of expert and tensor parallelism on torch.distributed, one process per rank:
EP dispatch and combine (DeepSeek-style top-k routing with skewed expert popularity, bf16 or fp8
payloads), TP all-reduce and all-gather, and a KV-cache transfer between two ranks.

NCCL on GPUs (launchers set NCCL_NVLS_ENABLE=0: no NVLink multicast), gloo on the CPU, where the
tests check every op against a single-process reference. Dispatch sends a token once per
destination rank, however many of its experts live there (DeepEP's per-rank dedup), with its top-k
expert ids and weights; combine returns each rank's weighted partial sums and adds them.

Two dispatch paths:
- `dispatch` / `combine` (the one engines use): fixed capacity, no host round-trip. Each rank packs
  its rows into `capacity` slots per destination (default: every token, so nothing is ever dropped)
  plus one header row carrying the count, and a single equal-split all_to_all moves the lot; slots
  come from a cumulative sum on the GPU, so nothing waits on the host and the whole path can be
  captured in a CUDA graph.
- `dispatch_host` / `combine_host` (the reference): exact split sizes, which the host must read
  before the all_to_all (a device-to-host sync per call); kept as the check and for comparison.
What this does not do: overlap with compute, RDMA low-latency kernels, or EP over nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

FP8 = torch.float8_e4m3fn
ALIGN = 16  # bytes; every section of a packed row starts on this boundary


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


def _a2a(out: torch.Tensor, inp: torch.Tensor, out_splits: list[int] | None = None,
         in_splits: list[int] | None = None, group: dist.ProcessGroup | None = None) -> None:  # fmt: skip
    """all_to_all_single on any dtype: 16- and 8-bit floats travel as bytes (bit-exact; gloo has
    no bf16 or fp8), split along rows as given (equal splits when None)."""
    if inp.dtype in (torch.bfloat16, torch.float16, FP8):
        out, inp = out.view(torch.uint8), inp.contiguous().view(torch.uint8)
    dist.all_to_all_single(out, inp.contiguous(), out_splits, in_splits, group=group)


def _sections(hidden: int, topk: int, fp8: bool) -> tuple[int, int, int, int, int]:
    """Byte offsets of a packed row: payload, fp8 scale, expert ids (int32), weights (fp32), end."""

    def up(n: int) -> int:
        return -(-n // ALIGN) * ALIGN

    scale = up(hidden * (1 if fp8 else 2))
    ids = scale + (ALIGN if fp8 else 0)
    wts = up(ids + 4 * topk)
    return 0, scale, ids, wts, up(wts + 4 * topk)


@dataclass
class Dispatched:
    """What a rank received (fixed capacity): world blocks of `capacity` rows plus a header row each.
    Rows past a block's count and the header rows carry zero weights (their payload is undefined).
    A bf16 dispatch hands over `x`; an fp8 one hands over `xq` and its per-row `x_scale`, as an FP8
    expert GEMM takes them (`hidden_states()` dequantizes)."""

    x: torch.Tensor | None  # [world * (capacity + 1), hidden] bf16 (strided view of the receive buffer)
    xq: torch.Tensor | None  # [rows, hidden] fp8 payload, with x_scale [rows] float32
    x_scale: torch.Tensor | None
    local_w: torch.Tensor  # [rows, local experts] weight of each local expert for the row (0: not routed)
    valid: torch.Tensor  # [rows] bool, the row holds a token
    slot: torch.Tensor  # [world, tokens] sender side: slot of each token in each destination's block
    sent: torch.Tensor  # [world, tokens] bool, sender side: the token went to that rank
    capacity: int

    def hidden_states(self, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
        if self.x is not None:
            return self.x
        assert self.xq is not None
        assert self.x_scale is not None
        return (self.xq.float() * self.x_scale[:, None]).to(dtype)


def dispatch(x: torch.Tensor, ids: torch.Tensor, w: torch.Tensor, experts: int, fp8: bool = False,
             capacity: int | None = None, group: dist.ProcessGroup | None = None) -> Dispatched:  # fmt: skip
    """Send each token to every rank that holds one of its experts (experts split contiguously), in
    one equal-split all_to_all and with no host synchronisation. `capacity` (rows per destination)
    must be the same on every rank: the largest token count any rank may hold (its default, this
    rank's tokens, is right when all ranks hold as many). A token beyond it for a destination is
    dropped, as capacity-factor MoE does; the largest token count drops none. Rows are packed and
    moved as 32-bit words (vectorised copies; every section is 16-byte aligned)."""
    world, rank, dev = dist.get_world_size(group), dist.get_rank(group), x.device
    (tokens, hidden), k = x.shape, ids.shape[1]
    per, cap = experts // world, tokens if capacity is None else capacity
    ids, w = ids.to(dev), w.to(dev)
    sent = torch.zeros(world, tokens, dtype=torch.bool, device=dev)
    sent.scatter_(0, (ids // per).t(), True)  # sent[dest, t]
    pos = sent.long().cumsum(1) - 1
    sent &= pos < cap
    slot = torch.where(sent, pos, cap)  # unsent tokens land in the header row, overwritten below
    o_pay, o_scale, o_ids, o_w, rb = (v // 4 for v in _sections(hidden, k, fp8))
    pay = hidden // 4 if fp8 else hidden // 2  # payload words
    row = torch.empty(tokens, rb, dtype=torch.int32, device=dev)
    if fp8:
        scale = x.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-8) / 448.0
        row[:, o_pay : o_pay + pay] = (x.float() / scale).to(FP8).view(torch.int32)
        row[:, o_scale : o_scale + 1] = scale.view(torch.int32)
    else:
        row[:, o_pay : o_pay + pay] = x.contiguous().view(torch.int32)
    row[:, o_ids : o_ids + k] = ids.to(torch.int32)
    row[:, o_w : o_w + k] = w.float().contiguous().view(torch.int32)
    send = torch.empty(world, cap + 1, rb, dtype=torch.int32, device=dev)
    for r in range(world):
        send[r].index_copy_(0, slot[r], row)
    send[:, cap, :2] = sent.sum(1, keepdim=True).view(torch.int32)  # header: the block's count (int64)
    recv = torch.empty_like(send)
    _a2a(recv, send, group=group)
    counts = recv[:, cap, :2].contiguous().view(torch.int64)  # [world, 1]
    valid = (torch.arange(cap + 1, device=dev) < counts).flatten()
    flat = recv.view(world * (cap + 1), rb)
    payload = flat[:, o_pay : o_pay + pay]  # strided views of the receive buffer, no copies
    rx, xq, xs = (
        (None, payload.view(FP8), flat[:, o_scale].view(torch.float32)) if fp8 else (payload.view(x.dtype), None, None)
    )
    rid = flat[:, o_ids : o_ids + k].long() - rank * per
    rw = flat[:, o_w : o_w + k].view(torch.float32)
    mine = (rid >= 0) & (rid < per) & valid[:, None]
    local_w = torch.zeros(len(flat), per, dtype=torch.float32, device=dev)
    local_w.scatter_add_(1, rid.clamp(0, per - 1), torch.where(mine, rw, 0.0))
    return Dispatched(rx, xq, xs, local_w, valid, slot, sent, cap)


def combine(y: torch.Tensor, d: Dispatched, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """Return each received row's weighted expert output (`y`, one row per dispatched row) to its
    sender in one equal-split all_to_all, then gather each token's row from every rank's block and
    sum them (torch accumulates in fp32 and rounds once); no host sync. An unsent token's slot is its block's
    header row, zeroed here, so no mask pass is needed."""
    world, tokens = d.sent.shape
    back = torch.empty(world * (d.capacity + 1), y.shape[1], dtype=y.dtype, device=y.device)
    _a2a(back, y.contiguous(), group=group)
    back.view(world, d.capacity + 1, -1)[:, d.capacity] = 0
    base = torch.arange(world, device=y.device)[:, None] * (d.capacity + 1)
    return back[(base + d.slot).flatten()].view(world, tokens, y.shape[1]).sum(0)  # bf16 in, fp32 accumulate


@dataclass
class HostDispatched:
    """What a rank received (exact splits): token rows, and per row the weights of its local experts."""

    x: torch.Tensor  # [rows, hidden] in the compute dtype
    local_w: torch.Tensor  # [rows, local experts]
    send_token: torch.Tensor  # [pairs] source token of each (token, destination rank) pair, in send order
    send_splits: list[int]
    recv_splits: list[int]

    def hidden_states(self) -> torch.Tensor:
        return self.x


def dispatch_host(x: torch.Tensor, ids: torch.Tensor, w: torch.Tensor, experts: int, fp8: bool = False,
                  group: dist.ProcessGroup | None = None) -> HostDispatched:  # fmt: skip
    """The reference: exact split sizes, read on the host (a sync) before each all_to_all."""
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
        recv_q = torch.empty(rows, x.shape[1], dtype=FP8, device=dev)
        recv_s = torch.empty(rows, 1, dtype=torch.float32, device=dev)
        _a2a(recv_q, (payload.float() / scale).to(FP8), recv_splits, send_splits, group)
        _a2a(recv_s, scale, recv_splits, send_splits, group)
        recv_x = (recv_q.float() * recv_s).to(x.dtype)
    else:
        recv_x = torch.empty(rows, x.shape[1], dtype=x.dtype, device=dev)
        _a2a(recv_x, payload, recv_splits, send_splits, group)
    return HostDispatched(recv_x, recv_w, pair_tok, send_splits, recv_splits)


def combine_host(
    y: torch.Tensor, d: HostDispatched, tokens: int, group: dist.ProcessGroup | None = None
) -> torch.Tensor:
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
