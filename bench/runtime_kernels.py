"""Runtime kernels worth calibrating on: MLA decode KV-read bandwidth, expert GEMM weight-read
bandwidth at few tokens per expert, and FP8 expert GEMM TFLOP/s at 256 tokens per expert.
Runs on a CUDA GPU; prints a table and saves bench/results/runtime_kernels.json (or $OUT).

Targets (issue): MLA decode at batch >= 64 and context >= 2k: >= 2.0 TB/s; expert GEMMs at <= 32
tokens per expert: >= 2.5 TB/s of weights; at 256 tokens per expert in fp8: >= 800 TFLOP/s.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from runtime import require_cuda


def main() -> None:
    require_cuda()
    from runtime.ops.attention import MLADecode  # noqa: PLC0415  (needs CUDA)
    from runtime.ops.gemm import GroupedGemm  # noqa: PLC0415
    from runtime.sweep import provenance  # noqa: PLC0415
    from runtime.timing import time_op  # noqa: PLC0415

    rows = []
    cases = [
        ("mla_decode", lambda b=b, c=c, kv=kv, be=be: MLADecode(b, c, 128, kv, be), f"B={b} ctx={c} {kv} KV {be}")
        for kv, be in (("bf16", "auto"), ("fp8", "fa3"), ("fp8", "fa2"))
        for b, c in ((64, 2048), (128, 2048), (64, 8192), (256, 4096))
    ]
    cases += [
        ("experts", lambda t=t, fmt=fmt: GroupedGemm(32, t, 4096, 7168, fmt), f"32 experts x {t} tok, {fmt}")
        for fmt in ("fp8", "bf16")
        for t in (4, 16, 32, 256)
    ]
    print("| op | shape | kernel | median us | TB/s (bytes/time) | TFLOP/s |")
    print("|---|---|---|---:|---:|---:|")
    for kind, make, label in cases:
        try:
            op = make()
            op.check()
        except (RuntimeError, ValueError, AssertionError) as exc:  # a backend that refuses a shape: say so
            print(f"| {kind} | {label} | failed: {str(exc).splitlines()[0][:80]} | | | |")
            continue
        t = time_op(op.run, reps=30)
        us = t.median_ms * 1e3
        weights = op.params.get("experts", 0) * 4096 * 7168 * (1 if op.fmt == "fp8" else 2)
        moved = op.bytes if kind == "mla_decode" else weights
        row = {
            "op": kind,
            "shape": label,
            "kernel": op.kernel,
            "median_us": us,
            "graph": t.graph,
            "tb_s": moved / (t.median_ms * 1e-3) / 1e12,
            "tflop_s": op.flops / (t.median_ms * 1e-3) / 1e12,
            "samples_ms": list(t.samples_ms),
        }
        rows.append(row)
        print(f"| {kind} | {label} | {op.kernel} | {us:,.1f} | {row['tb_s']:.2f} | {row['tflop_s']:,.0f} |")
    out_dir = Path(os.environ.get("OUT") or Path(__file__).resolve().parent / "results")
    (out_dir / "runtime_kernels.json").write_text(json.dumps({"provenance": provenance(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
