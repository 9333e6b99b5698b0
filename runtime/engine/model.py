"""A DeepSeek-V3-shaped model with random FP8 weights for the serving engine.

Real layer dimensions (hidden 7168, MLA with q_lora 1536 / kv_lora 512 / 128 heads, dense FFN
18432 in the first 3 layers, MoE after) with the routed experts cut to what one EP8 rank holds
(32 of 256; a token's 8 routed experts put 1 on this rank on average, so top-1 of 32) plus the
shared expert. Weights are FP8 (per-tensor scales for decode-sized GEMMs, DeepSeek 128x128 block
scales for prefill-sized ones, as `runtime.registry` chooses); kv_b stays BF16 for the absorbed
decode. Decode runs absorbed MLA on flashinfer's paged kernel; prefill runs non-absorbed MHA on
its ragged kernel, with the cached prefix's latents up-projected through kv_b.
"""

from __future__ import annotations

import math

import torch

from runtime.ops.moe import rmsnorm, rope

FP8 = torch.float8_e4m3fn
H, Q_LORA, KV_LORA, ROPE, NOPE, VD, HEADS = 7168, 1536, 512, 64, 128, 128, 128
DENSE_INTER, EXPERT_INTER, EXPERTS = 18432, 2048, 32
VOCAB = 129280


def _fp8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    s = w.abs().amax().float().clamp(min=1e-8) / 448.0
    return (w / s).to(FP8), s


class Linear:
    """y = x @ W^T with FP8 W [N, K]; activations quantized on the fly."""

    def __init__(self, n: int, k: int, dev: str) -> None:
        self.n, self.k = n, k
        self.wq, self.sw = _fp8(torch.randn(n, k, device=dev, dtype=torch.bfloat16) / math.sqrt(k))
        self.block = n % 128 == 0 and k % 128 == 0
        if self.block:  # (K/128, N/128), K-major, as torch wants for 128x128 weight blocks
            self.swb = torch.full((n // 128, k // 128), float(self.sw), device=dev).t()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        m = x.shape[0]
        if self.block and m >= 256:
            pad = (-m) % 128
            xp = torch.nn.functional.pad(x, (0, 0, 0, pad)) if pad else x
            g = xp.view(m + pad, self.k // 128, 128)
            sx = g.abs().amax(-1).float().clamp(min=1e-8) / 448.0
            xq = (g / sx[..., None]).to(FP8).view(m + pad, self.k)
            y = torch._scaled_mm(xq, self.wq.t(), sx.t().contiguous().t(), self.swb, out_dtype=torch.bfloat16)
            return y[:m]
        sx = x.abs().amax().float().clamp(min=1e-8) / 448.0
        return torch._scaled_mm((x / sx).to(FP8), self.wq.t(), sx, self.sw, out_dtype=torch.bfloat16)


class Experts:
    """E routed experts (gate+up [E, 2I, H], down [E, H, I]) in FP8 with row-wise scales."""

    def __init__(self, e: int, dev: str) -> None:
        def q(shape: tuple[int, int, int]) -> tuple[torch.Tensor, torch.Tensor]:
            w = torch.randn(*shape, device=dev, dtype=torch.bfloat16) / math.sqrt(shape[2])
            s = w.abs().amax(dim=2).float().clamp(min=1e-8) / 448.0
            return (w / s[..., None]).to(FP8), s

        self.w13, self.s13 = q((e, 2 * EXPERT_INTER, H))
        self.w2, self.s2 = q((e, H, EXPERT_INTER))
        self.e = e

    @staticmethod
    def _rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s = x.abs().amax(dim=1).float().clamp(min=1e-8) / 448.0
        return (x / s[:, None]).to(FP8), s

    def __call__(self, x: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        xq, sx = self._rows(x)
        h = torch._scaled_grouped_mm(xq, self.w13.transpose(1, 2), sx, self.s13, offs=offs, out_dtype=torch.bfloat16)
        g, u = h.split(EXPERT_INTER, dim=-1)
        a = torch.nn.functional.silu(g) * u
        aq, sa = self._rows(a)
        return torch._scaled_grouped_mm(aq, self.w2.transpose(1, 2), sa, self.s2, offs=offs, out_dtype=torch.bfloat16)


class Layer:
    def __init__(self, dense: bool, dev: str) -> None:
        ones = torch.ones(H, device=dev, dtype=torch.bfloat16)
        self.norm1, self.norm2 = ones, ones.clone()
        self.q_norm = torch.ones(Q_LORA, device=dev, dtype=torch.bfloat16)
        self.kv_norm = torch.ones(KV_LORA, device=dev, dtype=torch.bfloat16)
        self.q_a, self.q_b = Linear(Q_LORA, H, dev), Linear(HEADS * (NOPE + ROPE), Q_LORA, dev)
        self.kv_a, self.o = Linear(KV_LORA + ROPE, H, dev), Linear(H, HEADS * VD, dev)
        kv_b = torch.randn(HEADS, NOPE + VD, KV_LORA, device=dev, dtype=torch.bfloat16) / math.sqrt(KV_LORA)
        self.w_uk, self.w_uv = kv_b[:, :NOPE].contiguous(), kv_b[:, NOPE:].contiguous()  # [h, d, c]
        self.kv_b = kv_b.view(HEADS * (NOPE + VD), KV_LORA)
        self.dense = dense
        if dense:
            self.w13, self.w2 = Linear(2 * DENSE_INTER, H, dev), Linear(H, DENSE_INTER, dev)
        else:
            self.gate = torch.randn(EXPERTS, H, device=dev, dtype=torch.bfloat16) / math.sqrt(H)
            self.bias = torch.zeros(EXPERTS, device=dev)
            self.experts = Experts(EXPERTS, dev)
            self.s13, self.s2 = Linear(2 * EXPERT_INTER, H, dev), Linear(H, EXPERT_INTER, dev)

    # ---- attention pieces
    def qkv(self, x: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        h = rmsnorm(x, self.norm1)
        q = self.q_b(rmsnorm(self.q_a(h), self.q_norm)).view(-1, HEADS, NOPE + ROPE)
        kv = self.kv_a(h)
        latent, k_pe = rmsnorm(kv[:, :KV_LORA], self.kv_norm), kv[:, KV_LORA:]
        q_pe = rope(q[:, :, NOPE:], pos)
        k_pe = rope(k_pe[:, None, :], pos)[:, 0]
        return q[:, :, :NOPE], q_pe, latent, k_pe

    def attn_out(self, o: torch.Tensor) -> torch.Tensor:
        return self.o(o.reshape(o.shape[0], HEADS * VD))

    # ---- FFN
    def ffn(self, x: torch.Tensor) -> torch.Tensor:
        h = rmsnorm(x, self.norm2)
        if self.dense:
            g, u = self.w13(h).split(DENSE_INTER, dim=-1)
            return x + self.w2(torch.nn.functional.silu(g) * u)
        t = h.shape[0]
        scores = torch.sigmoid(h.float() @ self.gate.float().t())
        top = (scores + self.bias).topk(1, dim=-1).indices.flatten()  # one local routed expert per token
        weight = scores.gather(1, top[:, None]).flatten()
        order = top.argsort(stable=True)
        counts = torch.zeros(EXPERTS, dtype=torch.int32, device=x.device).scatter_add_(
            0, top, torch.ones(t, dtype=torch.int32, device=x.device)
        )  # capture-safe, unlike bincount
        y = self.experts(h[order], counts.cumsum(0).to(torch.int32))
        out = torch.zeros_like(h, dtype=torch.float32).index_add_(0, order, y.float() * weight[order, None])
        g, u = self.s13(h).split(EXPERT_INTER, dim=-1)
        return x + (out + self.s2(torch.nn.functional.silu(g) * u).float()).to(x.dtype)


class Model:
    def __init__(self, layers: int = 61, dense_layers: int = 3, dev: str = "cuda") -> None:
        self.layers = [Layer(i < dense_layers, dev) for i in range(layers)]
        self.embed = torch.randn(VOCAB, H, device=dev, dtype=torch.bfloat16) * 0.02
        self.lm_head = torch.randn(VOCAB, H, device=dev, dtype=torch.bfloat16) / math.sqrt(H)
        self.final_norm = torch.ones(H, device=dev, dtype=torch.bfloat16)
        self.scale = 1.0 / math.sqrt(NOPE + ROPE)

    def logits_argmax(self, x: torch.Tensor) -> torch.Tensor:
        return (rmsnorm(x, self.final_norm) @ self.lm_head.t()).argmax(-1)
