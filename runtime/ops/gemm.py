"""Dense and grouped GEMMs on torch's kernels.

Dense: BF16 (`a @ w.T`), FP8 with one scale per tensor (`torch._scaled_mm`), FP8 with DeepSeek's
block scales (1x128 on activations, 128x128 on weights). At decode sizes the per-tensor kernel is
the faster FP8 path (shared/DEVICE.md: row-wise and block scales cost more at M <= 64), so the
registry picks it there and block scales from M >= 256. Grouped (MoE experts): BF16
`torch._grouped_mm` and FP8 row-wise `torch._scaled_grouped_mm` over contiguous expert segments.
"""

from __future__ import annotations

import torch

from runtime.ops import GpuOp

FP8 = torch.float8_e4m3fn


def _fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scale = x.abs().amax().float().clamp(min=1e-6) / 448.0
    return (x / scale).to(FP8), scale


class DenseGemm(GpuOp):
    """y[M, N] = x[M, K] @ w[N, K]^T."""

    def __init__(self, m: int, n: int, k: int, fmt: str = "bf16", scaling: str = "tensor") -> None:
        super().__init__("gemm", "gemm", fmt, {"m": m, "n": n, "k": k, "scaling": scaling if fmt == "fp8" else "-"})
        dev = "cuda"
        self.x = torch.randn(m, k, dtype=torch.bfloat16, device=dev)
        self.w = torch.randn(n, k, dtype=torch.bfloat16, device=dev) / k**0.5
        wb = 2 if fmt == "bf16" else 1
        self.flops = 2.0 * m * n * k
        self.bytes = n * k * wb + m * k * wb + m * n * 2.0
        self.scaling = scaling
        if fmt == "fp8":
            self.xq, self.sx = _fp8(self.x)
            self.wq, self.sw = _fp8(self.w)
            if scaling == "block":  # torch wants (M, K/128) outer-dim-major and (K/128, N/128) K-major
                self.sxb = torch.full((k // 128, m), float(self.sx), device=dev).t()
                self.swb = torch.full((n // 128, k // 128), float(self.sw), device=dev).t()
            self.kernel = f"torch._scaled_mm ({scaling} scales)"
            self.tol = (3e-2, 3e-2)
        else:
            self.kernel = "torch.matmul (cuBLAS)"

    def run(self) -> torch.Tensor:
        if self.fmt == "bf16":
            return self.x @ self.w.t()
        if self.scaling == "block":
            return torch._scaled_mm(self.xq, self.wq.t(), self.sxb, self.swb, out_dtype=torch.bfloat16)
        return torch._scaled_mm(self.xq, self.wq.t(), self.sx, self.sw, out_dtype=torch.bfloat16)

    def reference(self) -> torch.Tensor:
        if self.fmt == "fp8":  # the quantized inputs, dequantized: only accumulation may differ
            x, w = self.xq[:64].float() * self.sx, self.wq.float() * self.sw
            return x @ w.t()
        return (self.x.float() @ self.w.float().t())[:64]


class GroupedGemm(GpuOp):
    """`experts` segments of `tokens` rows each: y_e = x_e @ w_e^T with w_e of shape [N, K]."""

    def __init__(self, experts: int, tokens: int, n: int, k: int, fmt: str = "bf16") -> None:
        super().__init__("grouped_gemm", "moe_gemm", fmt, {"experts": experts, "tokens": tokens, "n": n, "k": k})
        dev = "cuda"
        rows = experts * tokens
        self.x = torch.randn(rows, k, dtype=torch.bfloat16, device=dev)
        self.w = torch.randn(experts, n, k, dtype=torch.bfloat16, device=dev) / k**0.5
        self.offs = torch.arange(1, experts + 1, dtype=torch.int32, device=dev) * tokens
        wb = 2 if fmt == "bf16" else 1
        self.flops = 2.0 * rows * n * k
        self.bytes = experts * n * k * wb + rows * k * wb + rows * n * 2.0
        self.rows_per_group = tokens
        if fmt == "fp8":
            xs = self.x.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-6) / 448.0
            ws = self.w.abs().amax(dim=2, keepdim=True).float().clamp(min=1e-6) / 448.0
            self.xq, self.sx = (self.x / xs).to(FP8), xs.squeeze(1).contiguous()
            self.wq, self.sw = (self.w / ws).to(FP8), ws.squeeze(2).contiguous()
            self.kernel = "torch._scaled_grouped_mm (row-wise scales)"
            self.tol = (3e-2, 3e-2)
        else:
            self.kernel = "torch._grouped_mm"

    def run(self) -> torch.Tensor:
        if self.fmt == "bf16":
            return torch._grouped_mm(self.x, self.w.transpose(1, 2), offs=self.offs)
        return torch._scaled_grouped_mm(
            self.xq, self.wq.transpose(1, 2), self.sx, self.sw, offs=self.offs, out_dtype=torch.bfloat16
        )

    def reference(self) -> torch.Tensor:
        t = int(self.offs[0])
        if self.fmt == "fp8":
            return (self.xq[:t].float() * self.sx[:t, None]) @ (self.wq[0].float() * self.sw[0][:, None]).t()
        return self.x[:t].float() @ self.w[0].float().t()
