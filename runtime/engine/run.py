"""Run the engine on closed-loop workloads and write anchors (shared/validation format) with what
it measured, so `planner validate` can compare the simulator's prediction with the real loop.

Usage (on a GPU): python -m runtime.engine.run --out DIR [--layers 61] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
import yaml

from runtime.engine.anchors import RUNTIME, WARMUP, write
from runtime.engine.model import Model
from runtime.engine.serve import PAGE, Engine
from runtime.sweep import provenance

# (concurrency, input tokens, output tokens, requests): concurrency 1..256, inputs 512..8k
WORKLOADS = [
    (1, 512, 128, 6),
    (8, 2048, 128, 24),
    (4, 8192, 128, 12),
    (32, 1024, 128, 64),
    (64, 512, 128, 128),
    (128, 1024, 64, 256),
    (256, 512, 64, 512),
]


def measure(done: list, warmup: float = WARMUP) -> dict[str, float]:
    """Means over requests after the first `warmup` share of completions (ramp-up left out)."""
    done = sorted(done, key=lambda r: r.finish)[int(len(done) * warmup) :]
    tpot = [(r.finish - r.first_token) / (r.osl - 1) for r in done]
    span = done[-1].finish - min(r.arrival for r in done)
    return {
        "ttft_ms": 1e3 * statistics.mean(r.first_token - r.arrival for r in done),
        "tpot_ms": 1e3 * statistics.mean(tpot),
        "e2e_ms": 1e3 * statistics.mean(r.finish - r.arrival for r in done),
        "output_tok_s": sum(r.osl for r in done) / span,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--layers", type=int, default=61)
    ap.add_argument("--quick", action="store_true", help="first two workloads only")
    ap.add_argument("--workloads", type=int, default=len(WORKLOADS), help="run the first N workloads")
    args = ap.parse_args()
    if args.workloads < 1:
        ap.error("--workloads must be at least 1")  # one line, exit 2
    t = time.perf_counter()
    torch.manual_seed(0)
    model = Model(layers=args.layers)
    free, _ = torch.cuda.mem_get_info()
    per_page = 2 * len(model.layers) * PAGE * (512 + 64)
    budget = yaml.safe_load(RUNTIME.read_text())["max_prefill_tokens"]
    engine = Engine(model, pages=int(0.85 * (free - 8e9) / per_page), budget=budget)
    print(f"model ready in {time.perf_counter() - t:.0f} s; {len(engine.free)} KV pages", flush=True)
    prov = provenance()
    results = []
    for c, isl, osl, n in WORKLOADS[: 2 if args.quick else args.workloads]:
        t = time.perf_counter()
        m = measure(engine.serve(c, isl, osl, n))
        results.append({"concurrency": c, "isl": isl, "osl": osl, "requests": n, **m})
        print(
            f"C={c} isl={isl} osl={osl}: TTFT {m['ttft_ms']:.1f} ms TPOT {m['tpot_ms']:.2f} ms "
            f"E2E {m['e2e_ms']:.0f} ms {m['output_tok_s']:.0f} tok/s ({time.perf_counter() - t:.0f} s)",
            flush=True,
        )
    write(args.out, results, prov)


if __name__ == "__main__":
    main()
