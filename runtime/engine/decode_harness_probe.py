"""Does the disaggregated engine's decode worker (runtime.engine.pd) pay for its harness? On one
GPU, the single-GPU engine's closed loop at C=1 (isl 512, osl 128) is timed three ways: as
`runtime.engine.run` runs it; after the worker's set-up (an NCCL process group, every decode
bucket's CUDA graph captured up front); and with the worker's per-step polling of a
multiprocessing queue added. A decode step that slows only with the harness is an artefact.

Usage (on a GPU): python -m runtime.engine.decode_harness_probe OUT.json
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

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
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    dist.all_reduce(torch.ones(1, device="cuda"))  # the communicator exists, its watchdog runs
    max_pages = len(eng.free) + 1
    for b in BUCKETS:
        eng._graph(b, max_pages)
    rows["nccl_and_all_graphs"] = _c1(eng)
    print(rows, flush=True)
    q = mp.get_context("spawn").Queue()
    decode = eng.decode

    def polled(running: list, mp_: int, bucket: int | None = None) -> None:  # type: ignore[type-arg]
        with contextlib.suppress(queue.Empty):  # empty: the worker's usual case
            q.get_nowait()
        decode(running, mp_, bucket)

    eng.decode = polled  # type: ignore[method-assign]
    rows["plus_queue_poll"] = _c1(eng)
    print(rows, flush=True)
    dist.destroy_process_group()
    out.write_text(json.dumps({"provenance": provenance() | {"command": __doc__.split("Usage")[0].strip()[:80]},
                               "c1_isl512": rows}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
