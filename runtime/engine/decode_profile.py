"""Decode steps of the full engine (all 61 layers, prompts really prefilled): CUDA-graph replay time
against the same kernels' durations by family, so the step model's per-kernel graph cost and small-M
GEMM pricing can be checked on the engine itself rather than on a 1-2 layer slice.

Usage (on a GPU): python -m runtime.engine.decode_profile OUT.json
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from runtime.engine.model import Model
from runtime.engine.profile import _family
from runtime.engine.serve import Engine, Req
from runtime.sweep import provenance

BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def main() -> None:
    torch.manual_seed(0)
    eng = Engine(Model(), pages=4096)
    out: dict[str, object] = {"provenance": provenance()}
    for b in (1, 8, 64):
        reqs = [Req(i, 512, 1000, 0.0, pages=[eng.free.popleft() for _ in range(10)]) for i in range(b)]
        for i in range(0, b, 16):
            eng.prefill_step([(r, 512) for r in reqs[i : i + 16]])
        for r in reqs:
            r.generated = 1
        for _ in range(3):
            eng.decode(reqs, 4096)
        g, st, wrapper = eng._graph(next(x for x in BUCKETS if x >= b), 4096)
        reps = []
        for _ in range(10):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            g.replay()
            e.record()
            e.synchronize()
            reps.append(s.elapsed_time(e))
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            eng._decode_body(st, wrapper)
            torch.cuda.synchronize()
        fam: dict[str, float] = {"replay_ms": statistics.median(reps), "kernels_ms": 0.0, "count": 0.0}
        for ev in prof.key_averages():
            if ev.device_type == torch.autograd.DeviceType.CUDA:
                ms = ev.self_device_time_total * 1e-3
                fam[_family(ev.key)] = fam.get(_family(ev.key), 0.0) + ms
                fam["kernels_ms"] += ms
                fam["count"] += ev.count
        fam["gap_us_per_kernel"] = 1e3 * (fam["replay_ms"] - fam["kernels_ms"]) / fam["count"]
        out[str(b)] = {k: round(v, 4) for k, v in fam.items()}
        print(b, fam, flush=True)
        Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
        eng.free.extend(p for r in reqs for p in r.pages)


if __name__ == "__main__":
    main()
