"""The engine's DeepSeek-V3-shaped model with its routed experts split over `world` GPUs (expert
parallelism), for runtime.engine.ep: every rank keeps attention, the dense layers and the shared
expert whole (data-parallel attention, as SGLang's DP-attention + EP runs) and 32 routed experts
of the 32 x world; a token picks top-`world` of them, so it lands on one expert per rank on average,
as a DeepSeek-V3 token's 8 of 256 experts do at EP8 (world 8 is DeepSeek-V3's own routing).

Each MoE layer routes over all experts, sends every token to the ranks holding its experts with
`runtime.comm.dispatch` (fixed capacity, no host sync, CUDA-graph capturable), runs this rank's
grouped expert GEMMs on what it received, and returns the weighted outputs with
`runtime.comm.combine`. The capacity (rows per destination) must be the same on every rank in a
step: the engine agrees on it (the largest token count of any rank) before each step.
What this does not do: overlap communication with compute, or drop tokens (capacity never cuts).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from runtime import comm
from runtime.engine.model import EXPERT_INTER, EXPERTS, H, Layer, Model
from runtime.ops.moe import rmsnorm

ExpertFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (rows sorted by expert, int32 ends) -> rows


def local_pairs(local_w: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fixed-size (received row, local expert) pairs, k per row (the row's k heaviest local experts),
    sorted by expert with unrouted pairs (weight 0) last, so a grouped GEMM whose group ends are
    `offs` computes only routed pairs. Returns each pair's row, its weight (0: unrouted) and `offs`
    (int32 cumulative pair count per local expert). No host sync: capture-safe."""
    rows, per = local_w.shape
    w, e = local_w.topk(k, dim=1)
    key = torch.where(w > 0, e, per).flatten()
    order = key.argsort(stable=True)
    counts = torch.zeros(per + 1, dtype=torch.int32, device=local_w.device)
    counts.scatter_add_(0, key, torch.ones_like(key, dtype=torch.int32))  # capture-safe, unlike bincount
    row = torch.arange(rows * k, device=local_w.device).div(k, rounding_mode="floor")[order]
    return row, w.flatten()[order], counts[:per].cumsum(0).to(torch.int32)


def ep_moe(h: torch.Tensor, gate: torch.Tensor, bias: torch.Tensor, topk: int, experts: ExpertFn,
           capacity: int, group: torch.distributed.ProcessGroup | None = None,
           peers: Any = None) -> torch.Tensor:  # fmt: skip
    """Routed-expert output [tokens, H] (fp32) of `h` under expert parallelism: experts split
    contiguously over the group's ranks, this rank holding `gate.shape[0] / world` of them, run by
    `experts`. `capacity` must be the same on every rank and at least any rank's token count.
    `peers` (a `runtime.comm_p2p.PeerBuffers`): dispatch/combine by NVLink writes, else NCCL."""
    world = torch.distributed.get_world_size(group)
    n_exp = gate.shape[0]
    scores = torch.sigmoid(h.float() @ gate.float().t())
    ids = (scores + bias).topk(topk, dim=-1).indices
    w = scores.gather(1, ids)
    w = w / w.sum(-1, keepdim=True).clamp(min=1e-20)
    if peers is not None:
        d = peers.dispatch(h, ids, w, n_exp, capacity)
    else:
        d = comm.dispatch(h, ids, w, n_exp, capacity=capacity, group=group)
    row, pw, offs = local_pairs(d.local_w, min(topk, n_exp // world))
    y = experts(d.hidden_states()[row], offs)
    contrib = torch.where((pw > 0)[:, None], y.float() * pw[:, None], 0.0)  # rows past offs[-1]: undefined
    per_row = torch.zeros(d.local_w.shape[0], h.shape[1], dtype=torch.float32, device=h.device)
    per_row.index_add_(0, row, contrib)
    if peers is not None:
        return peers.combine(per_row.to(h.dtype), d).float()
    return comm.combine(per_row.to(h.dtype), d, group=group).float()


class EPLayer(Layer):
    """A `runtime.engine.model.Layer` whose MoE routes over EXPERTS x world experts, this rank's
    EXPERTS of them local; `step["cap"]` is the agreed capacity of the current step, `step["peers"]`
    the NVLink peer buffers when dispatch runs peer-to-peer (None: NCCL all_to_all)."""

    def __init__(self, dense: bool, dev: str, world: int, step: dict[str, Any]) -> None:
        super().__init__(dense, dev)
        self.step, self.topk = step, world
        if not dense:
            self.gate = torch.randn(EXPERTS * world, H, device=dev, dtype=torch.bfloat16) / math.sqrt(H)
            self.bias = torch.zeros(EXPERTS * world, device=dev)

    def ffn(self, x: torch.Tensor) -> torch.Tensor:
        if self.dense:
            return super().ffn(x)
        h = rmsnorm(x, self.norm2)
        out = ep_moe(h, self.gate, self.bias, self.topk, self.experts, self.step["cap"], peers=self.step.get("peers"))
        if x.shape[0] == 0:  # an idle rank: it only serves the other ranks' tokens
            return x
        g, u = self.s13(h).split(EXPERT_INTER, dim=-1)
        return x + (out + self.s2(torch.nn.functional.silu(g) * u).float()).to(x.dtype)


class EPModel(Model):
    """`Model` with EPLayer MoE layers; `step` is shared by every layer (the engine sets the cap)."""

    def __init__(self, world: int, layers: int = 61, dense_layers: int = 3, dev: str = "cuda") -> None:
        super().__init__(layers=0, dense_layers=dense_layers, dev=dev)
        self.world = world
        self.step: dict[str, Any] = {"cap": 1, "peers": None}
        self.layers = [EPLayer(i < dense_layers, dev, world, self.step) for i in range(layers)]

    def idle(self, cap: int) -> None:
        """Serve the other ranks' tokens through every MoE layer while this rank has none."""
        self.step["cap"] = cap
        x = torch.empty(0, H, dtype=torch.bfloat16, device=self.embed.device)
        for layer in self.layers:
            if not layer.dense:
                layer.ffn(x)
