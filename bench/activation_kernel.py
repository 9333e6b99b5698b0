"""The FFN's gated activation as a kernel of its own (roofline.ops.ffn_activation_op): its time on a
CUDA GPU against the step model's price for it (bytes / (HBM bandwidth x the elementwise path's
memory efficiency), roofline/kernel_paths.py). Runs on a CUDA GPU; prints a table and saves
bench/results/activation_kernel.json (or $OUT/activation_kernel.json) with the GPU's provenance.

Kernels timed, each reading the gate and up halves of an [M, 2I] BF16 tensor:
- `flashinfer`: flashinfer.activation.silu_and_mul (the CUDA kernel SGLang's sgl-kernel and vLLM's
  silu_and_mul follow), BF16 out; skipped where flashinfer is not installed.
- `triton-fp8`: a fused SiLU x up that writes the down GEMM's FP8 (e4m3) input with a per-tensor
  scale, as engines fuse the activation with the next GEMM's quantization.
- `torch-unfused`: torch.nn.functional.silu(g) * u (three passes), for contrast.
Shapes: Llama-3.1-8B (I = 14,336, TP1) and DeepSeek-V3's dense FFN at TP8 (18,432 / 8) and routed
experts (2,048 wide, top-8 pairs of 8,192 tokens over EP8), at prefill-sized rows.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from roofline.catalog import get_hardware
from roofline.kernel_paths import KERNELS
from runtime import require_cuda

SHAPES = (  # (label, rows, intermediate width)
    ("llama-3.1-8b, 4,096 tokens", 4096, 14336),
    ("llama-3.1-8b, 12,288 tokens", 12288, 14336),
    ("deepseek-v3 dense FFN, TP8, 8,192 tokens", 8192, 18432 // 8),
    ("deepseek-v3 routed pairs, EP8, 8,192 tokens", 8192 * 8 // 8, 2048),
)


def _triton_fp8():
    import torch  # noqa: PLC0415
    import triton  # noqa: PLC0415
    import triton.language as tl  # noqa: PLC0415

    @triton.jit
    def kernel(x, y, inv_scale, n_cols, block: tl.constexpr):
        row = tl.program_id(0)
        col = tl.program_id(1) * block + tl.arange(0, block)
        mask = col < n_cols
        g = tl.load(x + row * 2 * n_cols + col, mask=mask).to(tl.float32)
        u = tl.load(x + row * 2 * n_cols + n_cols + col, mask=mask).to(tl.float32)
        a = g / (1.0 + tl.exp(-g)) * u * tl.load(inv_scale)
        tl.store(y + row * n_cols + col, a.to(tl.float8e4nv), mask=mask)

    def run(x: torch.Tensor, y: torch.Tensor, inv_scale: torch.Tensor) -> None:
        rows, n = y.shape
        kernel[(rows, triton.cdiv(n, 1024))](x, y, inv_scale, n, block=1024)

    return run


def main() -> None:
    require_cuda()
    import torch  # noqa: PLC0415

    from runtime.sweep import provenance  # noqa: PLC0415
    from runtime.timing import time_op  # noqa: PLC0415

    try:
        from flashinfer.activation import silu_and_mul  # noqa: PLC0415
    except ImportError:
        silu_and_mul = None
    name = torch.cuda.get_device_name(0)
    hw = get_hardware("h100-sxm" if "H100" in name else "h200-sxm")
    path = KERNELS["elementwise-sm90"]
    prior_tb_s = hw.mem_bw * path.memory_eff / 1e12
    fp8 = _triton_fp8()
    rows = []
    print(f"step-model price: {hw.mem_bw / 1e12:.2f} TB/s x {path.memory_eff} ({path.name}) = {prior_tb_s:.2f} TB/s")
    print("| shape | kernel | median us | bytes moved | TB/s | / step-model rate |")
    print("|---|---|---:|---:|---:|---:|")
    for label, m, width in SHAPES:
        x = torch.randn(m, 2 * width, device="cuda", dtype=torch.bfloat16)
        out16 = torch.empty(m, width, device="cuda", dtype=torch.bfloat16)
        out8 = torch.empty(m, width, device="cuda", dtype=torch.float8_e4m3fn)
        inv = torch.ones(1, device="cuda", dtype=torch.float32)
        g, u = x[:, :width], x[:, width:]
        cases = [
            ("triton-fp8", lambda x=x, o=out8, s=inv: fp8(x, o, s), 1),
            ("torch-unfused", lambda g=g, u=u: torch.nn.functional.silu(g) * u, 2),
        ]
        if silu_and_mul is not None:
            cases.insert(0, ("flashinfer", lambda x=x, o=out16: silu_and_mul(x, out=o), 2))
        for kernel, fn, out_bytes in cases:
            try:
                t = time_op(fn, reps=30)
            except Exception as exc:  # a kernel that fails to build is one skipped row
                print(f"| {label} | {kernel} | skipped: {type(exc).__name__}: {str(exc)[:80]} | | | |")
                continue
            moved = m * width * (2 * 2 + out_bytes)
            tb_s = moved / (t.median_ms * 1e-3) / 1e12
            row = {"shape": label, "rows": m, "width": width, "kernel": kernel, "median_us": t.median_ms * 1e3}
            row |= {"bytes": moved, "tb_s": tb_s, "vs_step_model": tb_s / prior_tb_s, "graph": t.graph}
            rows.append(row)
            us = t.median_ms * 1e3
            print(f"| {label} | {kernel} | {us:,.1f} | {moved / 1e6:,.0f} MB | {tb_s:.2f} | {tb_s / prior_tb_s:.2f} |")
    out_dir = Path(os.environ.get("OUT") or Path(__file__).resolve().parent / "results")
    doc = {"provenance": provenance(), "hardware": hw.id, "step_model_tb_s": prior_tb_s, "rows": rows}
    (out_dir / "activation_kernel.json").write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
