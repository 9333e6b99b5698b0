"""EP dispatch and combine by peer-to-peer writes over NVLink into symmetric-memory buffers
(torch.distributed._symmetric_memory, multicast off): each rank writes its token rows straight
into the receive buffer of every rank that holds one of their experts, so only rows cross the
link (no NCCL staging, no padded all_to_all). Same fixed-capacity layout and result type as
`runtime.comm.dispatch` (world blocks of `capacity` slots plus a header row with the count; a
token's slot is a cumulative sum on the GPU), so nothing waits on the host and the path can be
captured in a CUDA graph. A device-side barrier (the symmetric memory's signal pads) before the
writes keeps a rank from overwriting rows a peer still reads, and one after them publishes them.

Rows move as 16-byte words (complex128 views: bit-exact copies), the payload straight from the
caller's hidden states and the ids/weights from a small side tensor; the rank's own block is
written on a side stream while the remote writes run. bf16 payloads only; CUDA only (no CPU
emulation: the sweep checks it against the host-split reference on the GPUs).
What this does not do: fp8 payloads, RDMA, or buffers larger than `max_tokens` rows per source.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from runtime.comm import Dispatched, _sections

W16 = torch.complex128  # a 16-byte element: index_copy_ moves rows in 16-byte words


class PeerBuffers:
    """Symmetric dispatch and combine buffers for up to `max_tokens` rows per source rank."""

    def __init__(self, max_tokens: int, hidden: int, topk: int, group: dist.ProcessGroup | None = None) -> None:
        import torch.distributed._symmetric_memory as symm  # noqa: PLC0415  (CUDA builds)

        pg = group or dist.group.WORLD
        assert pg is not None, "torch.distributed is not initialised"
        self.group = pg
        self.world, self.rank = dist.get_world_size(group), dist.get_rank(group)
        self.hidden, self.topk, self.max_rows = hidden, topk, max_tokens + 1
        self.rb = _sections(hidden, topk, False)[-1]  # bytes per row, a multiple of 16
        self.comb_off = self.world * self.max_rows * self.rb
        dev = torch.device("cuda", torch.cuda.current_device())
        total = self.comb_off + self.world * self.max_rows * hidden * 2
        self.buf = symm.empty(total, dtype=torch.uint8, device=dev)
        if hasattr(symm, "enable_symm_mem_for_group"):  # needed before rendezvous on older torch
            symm.enable_symm_mem_for_group(self.group.group_name)
        self.h = symm.rendezvous(self.buf, self.group.group_name)
        self.side = torch.cuda.Stream(dev)

    def _disp(self, r: int, cap: int) -> torch.Tensor:
        return self.h.get_buffer(r, (self.world, cap + 1, self.rb // 16), W16, 0)

    def _comb(self, r: int, cap: int) -> torch.Tensor:
        return self.h.get_buffer(r, (self.world, cap + 1, self.hidden), torch.bfloat16, self.comb_off // 2)

    def dispatch(self, x: torch.Tensor, ids: torch.Tensor, w: torch.Tensor, experts: int, capacity: int) -> Dispatched:
        """As `runtime.comm.dispatch` (bf16), by writes into the peers' buffers."""
        world, rank, dev = self.world, self.rank, x.device
        (tokens, hidden), k = x.shape, ids.shape[1]
        per, cap = experts // world, capacity
        if cap + 1 > self.max_rows:
            raise ValueError(f"capacity {cap} exceeds the symmetric buffers' {self.max_rows - 1} rows")
        sent = torch.zeros(world, tokens, dtype=torch.bool, device=dev)
        sent.scatter_(0, (ids // per).t(), True)
        pos = sent.long().cumsum(1) - 1
        sent &= pos < cap
        slot = torch.where(sent, pos, cap)  # unsent tokens land in the header row, rewritten below
        _, _, o_ids, o_w, end = (v // 4 for v in _sections(hidden, k, False))
        pay = o_ids // 4  # payload in 16-byte words
        meta = torch.zeros(tokens, end - o_ids, dtype=torch.int32, device=dev)
        meta[:, :k] = ids.to(torch.int32)
        meta[:, o_w - o_ids : o_w - o_ids + k] = w.float().view(torch.int32)
        meta16, x16 = meta.view(W16), x.contiguous().view(W16)
        head = torch.zeros(world, 2, dtype=torch.int64, device=dev)
        head[:, 0] = sent.sum(1)
        head16 = head.view(W16)
        self.h.barrier(channel=0)  # every peer is done reading what the last dispatch left
        main = torch.cuda.current_stream(dev)
        self.side.wait_stream(main)
        for r in [*(p for p in range(world) if p != rank), rank]:  # remote writes first, own block aside
            stream = self.side if r == rank else main
            with torch.cuda.stream(stream):
                blk = self._disp(r, cap)[rank]
                blk[:, :pay].index_copy_(0, slot[r], x16[:, : hidden * 2 // 16])
                blk[:, pay:].index_copy_(0, slot[r], meta16)
                blk[cap, :1].copy_(head16[r])
        main.wait_stream(self.side)
        self.h.barrier(channel=0)  # every peer's rows have landed here
        recv = self._disp(rank, cap).view(torch.int32).view(world * (cap + 1), self.rb // 4)
        counts = recv.view(world, cap + 1, -1)[:, cap, :2].contiguous().view(torch.int64)
        valid = (torch.arange(cap + 1, device=dev) < counts).flatten()
        rx = recv[:, : pay * 4].view(torch.bfloat16)
        rid = recv[:, o_ids : o_ids + k].long() - rank * per
        rw = recv[:, o_w : o_w + k].view(torch.float32)
        mine = (rid >= 0) & (rid < per) & valid[:, None]
        local_w = torch.zeros(len(recv), per, dtype=torch.float32, device=dev)
        local_w.scatter_add_(1, rid.clamp(0, per - 1), torch.where(mine, rw, 0.0))
        return Dispatched(rx, None, None, local_w, valid, slot, sent, cap)

    def combine(self, y: torch.Tensor, d: Dispatched) -> torch.Tensor:
        """As `runtime.comm.combine`: each block of rows goes back into its sender's buffer."""
        world, tokens = d.sent.shape
        cap, rank = d.capacity, self.rank
        yb = y.contiguous().view(world, cap + 1, -1)
        self.h.barrier(channel=0)
        for r in range(world):
            self._comb(r, cap)[rank].copy_(yb[r])
        self.h.barrier(channel=0)
        back = self._comb(rank, cap)
        back[:, cap] = 0
        base = torch.arange(world, device=y.device)[:, None] * (cap + 1)
        flat = back.view(world * (cap + 1), -1)
        return flat[(base + d.slot).flatten()].view(world, tokens, y.shape[1]).sum(0)
