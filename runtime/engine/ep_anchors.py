"""Anchors (../shared/validation format) of the expert-parallel engine (runtime.engine.ep) from its
measured results; no torch needed. They carry the single-GPU engine's measured runtime parameters
(engine/engine_runtime.yaml) plus what the EP engine measurably adds: its own kernels per MoE layer
beyond the dispatch and combine (which the step model prices from the communication profile),
counted by runtime.engine.ep_profile (engine/engine_ep_profile_world*.json), spread over all layers
as `elementwise_launches_per_layer` counts them.

`python -m runtime.engine.ep_anchors [--world 2]` rebuilds calibration/data/engine_ep{world}_anchors.yaml
from the committed calibration/data/engine_ep{world}_results.json; runtime.engine.ep_run calls the
same code after measuring.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import yaml

from runtime.engine.anchors import DATA, anchors, ep_config, ep_deployment

LAYERS, DENSE = 61, 3  # the engine model's layers (runtime.engine.model)


def extra_kernels(world: int) -> tuple[float, str]:
    """(EP kernels per MoE layer beyond dispatch/combine and the single-GPU FFN, source file): the
    profile at this world if there is one, else the largest world profiled (the count does not
    depend on the world outside dispatch/combine)."""
    files = sorted((DATA / "engine").glob("engine_ep_profile_world*.json"))
    if not files:
        raise FileNotFoundError("no engine/engine_ep_profile_world*.json: run runtime.engine.ep_profile")
    exact = DATA / "engine" / f"engine_ep_profile_world{world}.json"
    f = exact if exact.exists() else files[-1]
    rows = json.loads(f.read_text())["kernels_per_moe_layer"]
    return float(statistics.median(r["extra"] for r in rows)), f.name


def write_ep(out_dir: Path, results: list[dict[str, Any]], prov: dict[str, Any], world: int) -> Path:
    """engine_ep{world}_results.json and engine_ep{world}_anchors.yaml in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    name = f"engine_ep{world}"
    (out_dir / f"{name}_results.json").write_text(json.dumps({"provenance": prov, "results": results}, indent=1))
    extra, src = extra_kernels(world)
    docs = anchors(results, prov, ep_deployment(world), f"engine-ep{world}-h200", ep_config(world))
    for a in docs:
        base = a["runtime"]["elementwise_launches_per_layer"]
        a["runtime"]["elementwise_launches_per_layer"] = round(base + extra * (LAYERS - DENSE) / LAYERS, 2)
        a["source"] = a["source"].replace(
            "runtime.engine on", f"runtime.engine.ep ({world} GPUs, {prov.get('dispatch', 'nccl')} dispatch) on"
        )
        a["notes"] += (f"; DP attention + EP over {world} GPUs, ranks in lockstep; elementwise launches = the "
                       f"single-GPU engine's + {extra:g} EP kernels per MoE layer ({src})")  # fmt: skip
    path = out_dir / f"{name}_anchors.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "anchors": docs}, sort_keys=False))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--world", type=int, default=2)
    a = ap.parse_args()
    src = DATA / f"engine_ep{a.world}_results.json"
    if not src.exists():
        ap.error(f"--world: no {src.name} (run runtime.engine.ep_run on {a.world} GPUs)")
    data = json.loads(src.read_text())
    print(f"wrote {write_ep(DATA, data['results'], data['provenance'], a.world)}")


if __name__ == "__main__":
    main()
