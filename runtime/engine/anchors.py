"""Anchors (../shared/validation format) from the engine's measured results; no torch needed.

`python -m runtime.engine.anchors` rebuilds calibration/data/engine_anchors.yaml from the committed
calibration/data/engine_results.json and engine/engine_runtime.yaml, so the anchors always carry the
engine's current measured runtime parameters. runtime.engine.run calls the same code after measuring.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).resolve().parents[2] / "calibration" / "data"
CONFIG = "engine/deepseek-v3-ep8-rank_config.json"  # relative to calibration/data, where anchors live
RUNTIME = DATA / "engine" / "engine_runtime.yaml"
WARMUP = 0.25
METRICS = ("tpot_ms", "ttft_ms", "e2e_ms", "output_tok_s")


AGGREGATED = {"aggregated": {"instances": 1, "gpus_per_instance": 1, "tp": 1, "dp_attention": 1, "ep": 1, "pp": 1}}


def pd_deployment(prefill: int, decode: int) -> dict[str, Any]:
    """P prefill and D decode instances of one GPU each (runtime.engine.pd)."""
    one = {"gpus_per_instance": 1, "tp": 1, "dp_attention": 1, "ep": 1, "pp": 1}
    return {"prefill": {"instances": prefill, **one}, "decode": {"instances": decode, **one}}


def ep_deployment(world: int) -> dict[str, Any]:
    """One instance of `world` GPUs: attention data-parallel, experts over all (runtime.engine.ep)."""
    return {"aggregated": {"instances": 1, "gpus_per_instance": world, "tp": 1, "dp_attention": world,
                           "ep": world, "pp": 1}}  # fmt: skip


def ep_config(world: int) -> str:
    """The model config of runtime.engine.ep_model at `world` ranks (32 routed experts per rank,
    top-`world`), written beside the engine's other config; returns its path relative to DATA."""
    rel = f"engine/deepseek-v3-{32 * world}e-top{world}_config.json"
    cfg = json.loads((DATA / CONFIG).read_text())
    cfg |= {"n_routed_experts": 32 * world, "num_experts_per_tok": world, "ep_size": world,
            "_comment": f"runtime.engine.ep_model at {world} GPUs: 32 routed experts per GPU, top-{world} "
            "(a token lands on one expert per GPU on average, as DeepSeek-V3's top-8 of 256 does at EP8)"}  # fmt: skip
    path = DATA / rel
    if not path.exists() or json.loads(path.read_text()) != cfg:
        path.write_text(json.dumps(cfg, indent=1) + "\n")
    return rel


def anchor(
    c: int,
    isl: int,
    osl: int,
    n: int,
    metric: str,
    value: float,
    prov: dict[str, Any],
    deployment: dict[str, Any] = AGGREGATED,
    tag: str = "engine-h200",
    model: str = CONFIG,
) -> dict[str, Any]:
    """One anchor in ../shared/validation format, with the engine's measured runtime parameters and
    the simulation settings that reproduce its loop (request count, all clients at t=0, warm-up by
    completions, whole-request KV reservation)."""
    runtime = yaml.safe_load(RUNTIME.read_text())
    return {
        "id": f"{tag}-c{c}-isl{isl}-{metric.replace('_', '-')}",
        "source": f"runtime.engine on {prov['gpu']}, "
        f"{prov['date']} (torch {prov['torch']}, flashinfer {prov['flashinfer']})",
        "model": model,
        "hardware": "h200-sxm",
        "engine": "other",
        "phase": "end-to-end",
        "deployment": copy.deepcopy(deployment),  # no YAML aliases between anchors
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


def anchors(
    results: list[dict[str, Any]],
    prov: dict[str, Any],
    deployment: dict[str, Any] = AGGREGATED,
    tag: str = "engine-h200",
    model: str = CONFIG,
) -> list[dict[str, Any]]:
    return [
        anchor(r["concurrency"], r["isl"], r["osl"], r["requests"], k, r[k], prov, deployment, tag, model)
        for r in results
        for k in METRICS
    ]


def write(
    out_dir: Path,
    results: list[dict[str, Any]],
    prov: dict[str, Any],
    name: str = "engine",
    deployment: dict[str, Any] = AGGREGATED,
    tag: str = "engine-h200",
    model: str = CONFIG,
) -> None:
    """{name}_results.json (measurements with provenance) and {name}_anchors.yaml in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}_results.json").write_text(json.dumps({"provenance": prov, "results": results}, indent=1))
    doc = {"version": 1, "anchors": anchors(results, prov, deployment, tag, model)}
    (out_dir / f"{name}_anchors.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def main() -> None:
    data = json.loads((DATA / "engine_results.json").read_text())
    write(DATA, data["results"], data["provenance"])
    print(f"wrote {DATA / 'engine_anchors.yaml'}: {len(data['results']) * len(METRICS)} anchors")


if __name__ == "__main__":
    main()
