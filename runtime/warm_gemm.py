"""Decode-sized GEMMs timed the way the engine runs them: back to back in one CUDA graph, with
activations warm in L2 and no flush between kernels, each kernel on its own weights (distinct
copies, more than L2 holds together, so weights still stream from HBM as in a real step).

`runtime.sweep` times each op alone after an L2 flush; at M <= 64 that costs a cold start per
kernel that a 61-layer decode graph does not pay. This measures the same ops (same keys, FLOPs
and bytes) so `calibration.fit` can use these times for the shapes measured here. It does not
time the whole layer (runtime.engine.decode_profile does) or anything above M = 64.

The fit uses the decode range (M <= 256, the default; calibration/data/h200-sxm-warm-gemm.json).
Up to prefill chunks (--max-rows 4096; h200-sxm-warm-gemm-to-4096.json) back-to-back and isolated
times agree within a few percent at M >= 1024, so prefill keeps the isolated sweep's points.

Usage (on a GPU): python -m runtime.warm_gemm --out FILE [--max-rows 256]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from runtime.ops import GpuOp
from runtime.ops.gemm import DenseGemm, GroupedGemm
from runtime.sweep import DENSE, _key, provenance

SHARED = [(4096, 7168), (7168, 2048)]  # shared expert gate+up and down, also the routed expert shapes
ROWS = (1, 4, 16, 32, 64, 128, 256, 1024, 4096)  # decode batches and prefill chunks; FP8 block scales above 128
WEIGHT_BYTES = 256 * 1024 * 1024  # per shape, the copies together: > 4x the H200's 60 MB L2
MAX_COPIES = 64


def grid(max_rows: int = 256) -> list[Callable[[], GpuOp]]:
    ops: list[Callable[[], GpuOp]] = []
    for fmt in ("fp8", "bf16"):
        for n, k in DENSE + SHARED:
            for m in (r for r in ROWS if r <= max_rows):
                block = fmt == "fp8" and m > 128 and not (n % 128 or k % 128)  # as model.Linear picks
                scaling = "block" if block else "tensor"
                ops.append(lambda m=m, n=n, k=k, fmt=fmt, s=scaling: DenseGemm(m, n, k, fmt, s))
        for n, k in SHARED:
            for t in (t for t in (1, 4, 16, 32, 64, 128, 256, 512) if t <= max_rows // 2):
                ops.append(lambda t=t, n=n, k=k, fmt=fmt: GroupedGemm(32, t, n, k, fmt))
    return ops


def time_back_to_back(make: Callable[[], GpuOp], reps: int = 10) -> dict[str, Any]:
    """Median time per kernel of `copies` instances run back to back as one graph replay."""
    first = make()
    weight = first.w.numel() * (1 if first.fmt == "fp8" else 2)  # type: ignore[attr-defined]
    copies = max(4, min(MAX_COPIES, math.ceil(WEIGHT_BYTES / max(weight, 1.0))))
    ops = [first] + [make() for _ in range(copies - 1)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for op in ops:
            op.run()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for op in ops:
            op.run()
    g.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(reps):
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / copies)
    return {
        "key": _key(first),
        "op": first.name,
        "family": first.family,
        "fmt": first.fmt,
        "params": first.params,
        "flops": first.flops,
        "bytes": first.bytes,
        "launches": first.launches,
        "kernel": first.kernel,
        "graph": True,
        "timing": f"back to back, {copies} copies in one graph, warm L2",
        "median_ms": statistics.median(samples),
        "samples_ms": samples,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--max-rows", type=int, default=256, help="largest M (tokens per expert: half of it)")
    a = ap.parse_args()
    points = []
    for make in grid(a.max_rows):
        points.append(time_back_to_back(make))
        torch.cuda.empty_cache()
    a.out.write_text(json.dumps({"version": 1, "provenance": provenance(), "points": points}, indent=1))
    print(f"{len(points)} back-to-back points in {a.out}")


if __name__ == "__main__":
    main()
