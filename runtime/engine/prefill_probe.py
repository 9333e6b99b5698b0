"""Where an eager prefill step's time goes: whether the host (Python dispatch + kernel launches)
or the GPU (the kernels themselves) bounds it, for one prompt of each size, on the whole engine
(61 layers). Per size it records the wall time of Engine.prefill_step (it ends by reading the
first token back), the host time to issue every layer (when the model head is called), the GPU
time of its kernels summed under torch.profiler, their count, and the per-launch host time =
issue time / kernels. If the host bounds the step, wall ~= issue and the kernels' sum is smaller:
the step model must then not add launch overhead on top of kernel time.

Usage (on a GPU): python -m runtime.engine.prefill_probe OUT.json [--layers 61]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from runtime.engine.model import Model
from runtime.engine.serve import PAGE, Engine, Req
from runtime.sweep import provenance

SIZES = (128, 512, 1024, 2048, 8192)


def _one(eng: Engine, isl: int, issued: list[float]) -> tuple[float, float]:
    r = Req(0, isl, 1, 0.0, pages=[eng.free.popleft() for _ in range(-(-isl // PAGE))])
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    eng.prefill_step([(r, isl)])
    wall = time.perf_counter() - t0
    eng.free.extend(r.pages)
    return wall, issued[-1] - t0


def probe(eng: Engine, isl: int, reps: int = 5) -> dict[str, Any]:
    issued: list[float] = []
    head = eng.m.logits_argmax

    def stamped(x: torch.Tensor) -> torch.Tensor:
        issued.append(time.perf_counter())
        return head(x)

    eng.m.logits_argmax = stamped  # type: ignore[method-assign]
    try:
        _one(eng, isl, issued)  # warm-up
        runs = [_one(eng, isl, issued) for _ in range(reps)]
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            _one(eng, isl, issued)
        ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    finally:
        eng.m.logits_argmax = head  # type: ignore[method-assign]
    wall = statistics.median(w for w, _ in runs)
    issue = statistics.median(i for _, i in runs)
    kern = sum(e.device_time for e in ev) / 1e3  # us -> ms
    return {
        "isl": isl,
        "wall_ms": round(1e3 * wall, 3),
        "issue_ms": round(1e3 * issue, 3),
        "kernels_ms": round(kern, 3),
        "kernels": len(ev),
        "host_us_per_launch": round(1e6 * issue / max(len(ev), 1), 3),
        "bound": "host" if 1e3 * issue > kern else "gpu",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", type=Path)
    ap.add_argument("--layers", type=int, default=61)
    a = ap.parse_args()
    torch.manual_seed(0)
    model = Model(layers=a.layers)
    free, _ = torch.cuda.mem_get_info()
    eng = Engine(model, pages=int(0.5 * (free - 16e9) / (2 * a.layers * PAGE * 576)))
    rows = []
    for isl in SIZES:
        rows.append(probe(eng, isl))
        print(rows[-1], flush=True)
    prov = provenance() | {"command": "python -m runtime.engine.prefill_probe OUT", "layers": a.layers}
    a.out.write_text(json.dumps({"provenance": prov, "prefill": rows}, indent=1))


if __name__ == "__main__":
    main()
