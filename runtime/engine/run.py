"""Run the engine on closed-loop workloads and write anchors (shared/validation format) with what
it measured, so `planner validate` can compare the simulator's prediction with the real loop.

Usage (on a GPU): python -m runtime.engine.run --out DIR [--layers 61] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
import yaml

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
CONFIG = "engine/deepseek-v3-ep8-rank_config.json"  # relative to calibration/data, where anchors live
RUNTIME = Path(__file__).resolve().parents[2] / "calibration" / "data" / "engine" / "engine_runtime.yaml"
WARMUP = 0.25


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


def anchor(c: int, isl: int, osl: int, n: int, metric: str, value: float, prov: dict) -> dict:
    """One anchor in ../shared/validation format, with the engine's measured runtime parameters and
    the simulation settings that reproduce its loop (request count, all clients at t=0, warm-up by
    completions, whole-request KV reservation)."""
    runtime = yaml.safe_load(RUNTIME.read_text())
    return {
        "id": f"engine-h200-c{c}-isl{isl}-{metric.replace('_', '-')}",
        "source": f"runtime.engine on {prov['gpu']}, "
        f"{prov['date']} (torch {prov['torch']}, flashinfer {prov['flashinfer']})",
        "model": CONFIG,
        "hardware": "h200-sxm",
        "engine": "other",
        "phase": "end-to-end",
        "deployment": {
            "aggregated": {"instances": 1, "gpus_per_instance": 1, "tp": 1, "dp_attention": 1, "ep": 1, "pp": 1}
        },
        "precision": {"attention": "bf16", "kv_cache": "bf16", "dense": "fp8", "moe": "fp8"},
        "mtp": None,
        "workload": {"isl": isl, "osl": osl, "concurrency": c, "concurrency_scope": "total"},
        "runtime": runtime,
        "metric": metric,
        "value": round(value, 4),
        "unit": "ms" if metric.endswith("_ms") else "tok/s",
        "tolerance": 0.10,
        "notes": "closed loop, fixed lengths, all clients start at t=0; means after the first 25% of completions; "
        "runtime parameters measured on the engine (engine/engine_runtime.yaml)",
        "simulation": {
            "requests": n,
            "seed": 0,
            "closed_loop_ramp_s": 0.0,
            "warmup_fraction": WARMUP,
            "kv_reservation": 1.0,
            "warmup_by": "completion",
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--layers", type=int, default=61)
    ap.add_argument("--quick", action="store_true", help="first two workloads only")
    args = ap.parse_args()
    t = time.perf_counter()
    torch.manual_seed(0)
    model = Model(layers=args.layers)
    free, _ = torch.cuda.mem_get_info()
    per_page = 2 * len(model.layers) * PAGE * (512 + 64)
    budget = yaml.safe_load(RUNTIME.read_text())["max_prefill_tokens"]
    engine = Engine(model, pages=int(0.85 * (free - 8e9) / per_page), budget=budget)
    print(f"model ready in {time.perf_counter() - t:.0f} s; {len(engine.free)} KV pages", flush=True)
    prov = provenance()
    results, anchors = [], []
    for c, isl, osl, n in WORKLOADS[:2] if args.quick else WORKLOADS:
        t = time.perf_counter()
        m = measure(engine.serve(c, isl, osl, n))
        results.append({"concurrency": c, "isl": isl, "osl": osl, "requests": n, **m})
        print(
            f"C={c} isl={isl} osl={osl}: TTFT {m['ttft_ms']:.1f} ms TPOT {m['tpot_ms']:.2f} ms "
            f"E2E {m['e2e_ms']:.0f} ms {m['output_tok_s']:.0f} tok/s ({time.perf_counter() - t:.0f} s)",
            flush=True,
        )
        anchors += [anchor(c, isl, osl, n, k, m[k], prov) for k in ("tpot_ms", "ttft_ms", "output_tok_s")]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "engine_results.json").write_text(json.dumps({"provenance": prov, "results": results}, indent=1))
    (args.out / "engine_anchors.yaml").write_text(yaml.safe_dump({"version": 1, "anchors": anchors}, sort_keys=False))


if __name__ == "__main__":
    main()
