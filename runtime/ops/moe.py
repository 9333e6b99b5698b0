"""A DeepSeek MoE layer on real kernels: sigmoid router with correction bias and group-limited
top-k, token permutation, grouped gate/up GEMM, SwiGLU, grouped down GEMM, weighted combine, and
the shared expert; RMSNorm and RoPE. The reference loops over experts in fp32.

Routing follows DeepSeek-V3 (`inference/model.py` Gate): scores = sigmoid(logits); choice uses
scores + bias; groups are ranked by the sum of their top-2 biased scores and only `topk_group`
groups are eligible; weights are the unbiased scores of the chosen experts, normalised and
multiplied by the routed scaling factor.
"""

from __future__ import annotations

import torch

from runtime.ops import GpuOp


def route(
    x: torch.Tensor, gate: torch.Tensor, bias: torch.Tensor, top_k: int, n_group: int, topk_group: int, scaling: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(expert ids [T, k], weights [T, k]) for hidden states x [T, H] and gate [E, H]."""
    scores = torch.sigmoid(x.float() @ gate.float().t())
    biased = scores + bias
    t, e = biased.shape
    if n_group > 1:
        grouped = biased.view(t, n_group, e // n_group)
        group_score = grouped.topk(2, dim=-1).values.sum(-1)
        keep = torch.zeros_like(group_score).scatter_(1, group_score.topk(topk_group, dim=-1).indices, 1.0)
        biased = biased.masked_fill(~keep.bool().repeat_interleave(e // n_group, dim=1), float("-inf"))
    ids = biased.topk(top_k, dim=-1).indices
    w = scores.gather(1, ids)
    return ids, w / w.sum(-1, keepdim=True) * scaling


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def rope(x: torch.Tensor, pos: torch.Tensor, theta: float = 10000.0) -> torch.Tensor:
    """Rotary embedding (interleaved pairs, as DeepSeek's q_pe/k_pe) of x [T, heads, d]."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    ang = pos.float()[:, None] * inv[None, :]
    cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
    xr = x.float().view(*x.shape[:-1], d // 2, 2)
    out = torch.stack((xr[..., 0] * cos - xr[..., 1] * sin, xr[..., 0] * sin + xr[..., 1] * cos), dim=-1)
    return out.flatten(-2).to(x.dtype)


class MoELayer(GpuOp):
    """One MoE layer for `tokens` tokens on `experts` local experts (an EP rank's share)."""

    def __init__(
        self,
        tokens: int,
        experts: int = 32,
        hidden: int = 7168,
        inter: int = 2048,
        top_k: int = 8,
        n_group: int = 8,
        topk_group: int = 4,
    ) -> None:
        super().__init__("moe_layer", "moe_layer", "bf16", {"tokens": tokens, "experts": experts, "top_k": top_k})
        dev = "cuda"
        self.x = torch.randn(tokens, hidden, dtype=torch.bfloat16, device=dev)
        self.gate = torch.randn(experts, hidden, dtype=torch.bfloat16, device=dev) / hidden**0.5
        self.bias = torch.zeros(experts, device=dev)
        self.w13 = torch.randn(experts, 2 * inter, hidden, dtype=torch.bfloat16, device=dev) / hidden**0.5
        self.w2 = torch.randn(experts, hidden, inter, dtype=torch.bfloat16, device=dev) / inter**0.5
        self.shared13 = torch.randn(2 * inter, hidden, dtype=torch.bfloat16, device=dev) / hidden**0.5
        self.shared2 = torch.randn(hidden, inter, dtype=torch.bfloat16, device=dev) / inter**0.5
        self.top_k, self.n_group = min(top_k, experts), n_group if experts % n_group == 0 else 1
        self.topk_group, self.inter, self.experts = min(topk_group, self.n_group), inter, experts
        pairs = tokens * self.top_k
        self.flops = 2.0 * (pairs + tokens) * 3 * hidden * inter
        self.bytes = (experts + 1) * 3 * hidden * inter * 2.0 + pairs * hidden * 2.0 * 4
        self.kernel = "torch router/sort + torch._grouped_mm"
        self.tol = (5e-2, 5e-2)

    def _swiglu(self, h: torch.Tensor) -> torch.Tensor:
        g, u = h.split(self.inter, dim=-1)
        return torch.nn.functional.silu(g) * u

    def run(self) -> torch.Tensor:
        ids, w = route(self.x, self.gate, self.bias, self.top_k, self.n_group, self.topk_group, 2.5)
        flat = ids.flatten()
        order = flat.argsort(stable=True)
        tok = order // self.top_k
        counts = torch.bincount(flat, minlength=self.experts)
        offs = counts.cumsum(0).to(torch.int32)
        xs = self.x[tok]  # permute: rows grouped by expert
        h = torch._grouped_mm(xs, self.w13.transpose(1, 2), offs=offs)
        y = torch._grouped_mm(self._swiglu(h), self.w2.transpose(1, 2), offs=offs)
        out = torch.zeros(self.x.shape, dtype=torch.float32, device=self.x.device)
        out.index_add_(0, tok, y.float() * w.flatten()[order, None])  # combine
        shared = self._swiglu(self.x @ self.shared13.t()) @ self.shared2.t()
        return (out + shared.float()).to(torch.bfloat16)

    def reference(self) -> torch.Tensor:
        ids, w = route(self.x, self.gate, self.bias, self.top_k, self.n_group, self.topk_group, 2.5)
        x = self.x.float()
        out = torch.zeros_like(x)
        for e in range(self.experts):
            rows, slot = (ids == e).nonzero(as_tuple=True)
            if len(rows):
                h = x[rows] @ self.w13[e].float().t()
                g, u = h.split(self.inter, dim=-1)
                out.index_add_(
                    0, rows, ((torch.nn.functional.silu(g) * u) @ self.w2[e].float().t()) * w[rows, slot, None]
                )
        g, u = (x @ self.shared13.float().t()).split(self.inter, dim=-1)
        return out + (torch.nn.functional.silu(g) * u) @ self.shared2.float().t()


class RMSNormOp(GpuOp):
    def __init__(self, tokens: int, hidden: int = 7168) -> None:
        super().__init__("rmsnorm", "elementwise", "bf16", {"tokens": tokens, "hidden": hidden})
        self.x = torch.randn(tokens, hidden, dtype=torch.bfloat16, device="cuda")
        self.w = torch.rand(hidden, dtype=torch.bfloat16, device="cuda") + 0.5
        self.bytes = 2.0 * tokens * hidden * 2
        self.kernel = "torch ops (fp32 accumulate)"

    def run(self) -> torch.Tensor:
        return rmsnorm(self.x, self.w)

    def reference(self) -> torch.Tensor:
        x = self.x.float()
        return (x / x.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt() * self.w.float())[:64]
