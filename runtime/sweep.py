"""Shape sweeps on the local GPU, written as a calibration profile with provenance.

Grids cover what a serving step runs: MLA decode over batch x context (bf16 and fp8 KV), GQA decode
over batch x context for a rank's heads of Llama-3.1-8B (32/8), Llama-3.1-70B at TP8 (8/1),
Qwen3-235B (64/4) and gpt-oss-120b (64/8, head_dim 64) (bf16 and fp8 KV), MLA
prefill with and without a cached prefix, DeepSeek-V3's dense GEMM shapes over token counts
(bf16, fp8), grouped expert GEMMs over tokens per expert (bf16, fp8), RMSNorm. Each point is
timed with `runtime.timing.time_op` (CUDA graphs, cold L2, median of the samples). The profile
is rewritten after every point, so a run cut off by its time budget resumes where it stopped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

import torch

from runtime.ops import GpuOp
from runtime.ops.attention import MLADecode, MLAPrefill
from runtime.ops.gemm import DenseGemm, GroupedGemm
from runtime.ops.gqa import GQADecode
from runtime.ops.moe import RMSNormOp
from runtime.timing import time_op

# DeepSeek-V3 dense shapes (N, K): q_a, q_b, kv_a, o_proj, dense FFN gate_up, dense FFN down
DENSE = [(1536, 7168), (24576, 1536), (576, 7168), (7168, 16384), (36864, 7168), (7168, 18432)]


def _mla_decode() -> Iterator[Callable[[], GpuOp]]:
    for kv in ("bf16", "fp8"):
        for b in (1, 8, 32, 64, 128, 256):
            for ctx in (512, 2048, 8192):
                yield partial(MLADecode, b, ctx, 128, kv)
        for b, ctx in ((64, 4096), (16, 16384)):  # off-grid shapes
            yield partial(MLADecode, b, ctx, 128, kv)


# A rank's (query heads, KV heads, head_dim) of the GQA models in the catalog
GQA_SHAPES = [(32, 8, 128), (8, 1, 128), (64, 4, 128), (64, 8, 64)]


def _gqa_decode() -> Iterator[Callable[[], GpuOp]]:
    for kv in ("bf16", "fp8"):
        for heads, kv_heads, hd in GQA_SHAPES:
            for b in (1, 8, 32, 128, 512):
                for ctx in (512, 2048, 8192):
                    yield partial(GQADecode, b, ctx, heads, kv_heads, hd, kv)
            yield partial(GQADecode, 16, 32768, heads, kv_heads, hd, kv)  # long context, off-grid


def _attn_prefill() -> Iterator[Callable[[], GpuOp]]:
    for batch, new, prefix in (
        (1, 512, 0),
        (1, 2048, 0),
        (4, 2048, 0),
        (1, 8192, 0),
        (2, 4096, 0),
        (1, 1024, 4096),
        (2, 2048, 2048),
        (8, 1024, 0),
        (1, 4096, 8192),
    ):
        yield partial(MLAPrefill, batch, new, prefix)


def _gemm() -> Iterator[Callable[[], GpuOp]]:
    for fmt, scaling in (("bf16", "tensor"), ("fp8", "tensor"), ("fp8", "block")):
        for n, k in DENSE:
            for m in (1, 16, 64, 256, 1024, 4096, 16384):
                block_ok = not (n % 128 or k % 128 or m < 256)
                if (fmt, scaling) == ("fp8", "block") and not block_ok:
                    continue
                if (fmt, scaling) == ("fp8", "tensor") and m > 1024:
                    continue
                yield partial(DenseGemm, m, n, k, fmt, scaling)


def _moe_gemm() -> Iterator[Callable[[], GpuOp]]:
    for fmt in ("bf16", "fp8"):
        for experts in (8, 32):
            for tokens in (1, 4, 16, 32, 64, 128, 256, 512, 1024):
                for n, k in ((4096, 7168), (7168, 2048)):  # gate+up, down
                    yield partial(GroupedGemm, experts, tokens, n, k, fmt)


def _elementwise() -> Iterator[Callable[[], GpuOp]]:
    for t in (1, 64, 1024, 8192, 32768):
        yield partial(RMSNormOp, t)


GRIDS: dict[str, Callable[[], Iterator[Callable[[], GpuOp]]]] = {
    "mla_decode": _mla_decode,
    "gqa_decode": _gqa_decode,
    "attn_prefill": _attn_prefill,
    "gemm": _gemm,
    "moe_gemm": _moe_gemm,
    "elementwise": _elementwise,
}


def grid(family: str) -> Iterator[Callable[[], GpuOp]]:
    if family not in GRIDS:
        raise ValueError(f"unknown op family {family!r}; known: {', '.join(GRIDS)}")
    return GRIDS[family]()


FAMILIES = tuple(GRIDS)


def provenance() -> dict[str, Any]:
    props = torch.cuda.get_device_properties(0)
    try:
        import flashinfer  # noqa: PLC0415

        fi = flashinfer.__version__
    except ImportError:
        fi = None
    driver = None
    try:
        import subprocess  # noqa: PLC0415

        query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        driver = subprocess.run(query, check=False, capture_output=True, text=True, timeout=20).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        pass
    return {
        "gpu": props.name,
        "sm_count": props.multi_processor_count,
        "compute_capability": f"{props.major}.{props.minor}",
        "memory_gb": round(props.total_memory / 1e9, 1),
        "driver": driver,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "flashinfer": fi,
        "date": date.today().isoformat(),
    }


def _key(op: GpuOp) -> str:
    return f"{op.name}|{op.fmt}|{json.dumps(op.params, sort_keys=True)}"


def run_sweep(
    families: list[str], out: Path, budget_s: float, check: bool = True, log: Callable[[str], None] = print
) -> dict[str, Any]:
    profile: dict[str, Any] = {"version": 1, "provenance": provenance(), "points": []}
    if out.exists():
        old = json.loads(out.read_text())
        profile["points"] = old.get("points", [])
    done = {p["key"] for p in profile["points"]}
    t0 = time.monotonic()
    for fam in families:
        checked = not check
        for make in grid(fam):
            if time.monotonic() - t0 > budget_s:
                log(f"time budget reached; {len(profile['points'])} points saved, rerun to resume")
                return profile
            op = make()
            key = _key(op)
            if key in done:
                continue
            if not checked:
                op.check()  # correctness against the plain-torch reference, once per family
                checked = True
            timing = time_op(op.run)
            profile["points"].append(
                {
                    "key": key,
                    "op": op.name,
                    "family": op.family,
                    "fmt": op.fmt,
                    "params": op.params,
                    "flops": op.flops,
                    "bytes": op.bytes,
                    "launches": op.launches,
                    "kernel": op.kernel,
                    "graph": timing.graph,
                    "median_ms": timing.median_ms,
                    "samples_ms": list(timing.samples_ms),
                }
            )
            done.add(key)
            tmp = out.with_name(out.name + ".part")
            tmp.write_text(json.dumps(profile, indent=1))
            tmp.replace(out)
            del op
            torch.cuda.empty_cache()
        log(f"{fam}: done ({time.monotonic() - t0:.0f} s)")
    return profile


def main() -> None:
    """`python -m runtime.sweep --out profile.json --budget-minutes 6 [--ops a,b]` (no planner imports)."""
    import argparse  # noqa: PLC0415

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ops", default=",".join(FAMILIES))
    ap.add_argument("--out", type=Path, default=Path("profile.json"))
    ap.add_argument("--budget-minutes", type=float, default=8.0)
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args()
    fams = [f for f in args.ops.split(",") if f]
    profile = run_sweep(fams, args.out, args.budget_minutes * 60, check=not args.no_check)
    print(f"{len(profile['points'])} points in {args.out}")


if __name__ == "__main__":
    main()
