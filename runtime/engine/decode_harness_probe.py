"""Does the disaggregated engine's decode worker (runtime.engine.pd) pay for its harness? On one
GPU, the single-GPU engine's closed loop at C=1 (isl 512, osl 128) is timed as `runtime.engine.run`
runs it, then after each piece of the worker's set-up in turn: every decode bucket's CUDA graph
captured up front, an NCCL process group, and that group destroyed again. A decode step that
slows only with the harness is an artefact. (A first run, engine_decode_harness_probe.json, took
graphs + NCCL together, then added the worker's queue poll per step.)

Usage (on a GPU): python -m runtime.engine.decode_harness_probe OUT.json
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from runtime.engine.model import Model
from runtime.engine.run import measure
from runtime.engine.serve import BUCKETS, PAGE, Engine
from runtime.sweep import provenance


def _c1(eng: Engine) -> dict[str, float]:
    return {k: round(v, 3) for k, v in measure(eng.serve(1, 512, 128, 6)).items()}


def main() -> None:
    out = Path(sys.argv[1])
    torch.manual_seed(0)
    model = Model(layers=61)
    free, _ = torch.cuda.mem_get_info()
    eng = Engine(model, pages=int(0.8 * (free - 12e9) / (2 * 61 * PAGE * 576)), budget=8192)
    rows: dict[str, Any] = {"plain": _c1(eng)}
    print(rows, flush=True)
    max_pages = len(eng.free) + 1
    for b in BUCKETS:  # as the PD decode worker does before serving
        eng._graph(b, max_pages)
    rows["all_graphs"] = _c1(eng)
    print(rows, flush=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    dist.all_reduce(torch.ones(1, device="cuda"))  # the communicator exists, its watchdog runs
    rows["all_graphs_and_nccl"] = _c1(eng)
    print(rows, flush=True)
    dist.destroy_process_group()
    rows["nccl_destroyed"] = _c1(eng)
    print(rows, flush=True)
    os.environ.update(TORCH_NCCL_ENABLE_MONITORING="0", TORCH_NCCL_ASYNC_ERROR_HANDLING="0")
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port + 1}", rank=0, world_size=1)
    dist.all_reduce(torch.ones(1, device="cuda"))
    rows["nccl_again_no_monitoring"] = _c1(eng)
    print(rows, flush=True)
    dist.destroy_process_group()
    out.write_text(json.dumps({"provenance": provenance() | {"command": __doc__.split("Usage")[0].strip()[:80]},
                               "c1_isl512": rows}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
