"""Does the disaggregated engine's decode worker (runtime.engine.pd) pay for its harness? On one
GPU, the single-GPU engine's closed loop at C=1 (isl 512, osl 128) is timed as `runtime.engine.run`
runs it, then after each piece of the worker's set-up in turn: every decode bucket's CUDA graph
captured up front, an NCCL process group, and that group destroyed again. A decode step that
slows only with the harness is an artefact. (A first run, engine_decode_harness_probe.json, took
graphs + NCCL together, then added the worker's queue poll per step.)

Usage (on a GPU): python -m runtime.engine.decode_harness_probe OUT.json [--split | --repeat]
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from runtime.engine.model import Model
from runtime.engine.run import measure
from runtime.engine.serve import BUCKETS, PAGE, Engine
from runtime.sweep import provenance

REPLAYS: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
WALLS: list[float] = []


def _c1(eng: Engine) -> dict[str, float]:
    """C=1's metrics, plus (with --split) the mean GPU span of a decode graph replay (CUDA events
    around it) and the mean wall time of Engine.decode, over the same steps."""
    REPLAYS.clear()
    WALLS.clear()
    row = {k: round(v, 3) for k, v in measure(eng.serve(1, 512, 128, 6)).items()}
    if REPLAYS:
        row["replay_gpu_ms"] = round(statistics.median(a.elapsed_time(b) for a, b in REPLAYS), 3)
        row["decode_wall_ms"] = round(1e3 * statistics.median(WALLS), 3)
    return row


def _split(eng: Engine) -> None:
    """Time every graph replay on the GPU and every Engine.decode on the host."""
    replay = torch.cuda.CUDAGraph.replay

    def timed_replay(g: torch.cuda.CUDAGraph) -> None:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        replay(g)
        b.record()
        REPLAYS.append((a, b))

    torch.cuda.CUDAGraph.replay = timed_replay  # type: ignore[method-assign]
    decode = eng.decode

    def timed_decode(running: list, max_pages: int, bucket: int | None = None) -> None:  # type: ignore[type-arg]
        t = time.perf_counter()
        decode(running, max_pages, bucket)
        WALLS.append(time.perf_counter() - t)

    eng.decode = timed_decode  # type: ignore[method-assign]


class Clocks:
    """nvidia-smi samples (SM clock MHz, temperature C, power W) every 0.5 s while running."""

    def __init__(self) -> None:
        self.samples: list[list[float]] = []
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self) -> None:
        q = [
            "nvidia-smi",
            "-i",
            "0",
            "--query-gpu=clocks.sm,temperature.gpu,power.draw",
            "--format=csv,noheader,nounits",
        ]
        while not self.stop.is_set():
            out = subprocess.run(q, check=False, capture_output=True, text=True).stdout.strip()
            with contextlib.suppress(ValueError):
                self.samples.append([float(v) for v in out.split(",")])
            time.sleep(0.5)

    def done(self) -> dict[str, float]:
        self.stop.set()
        self.t.join()
        cols = list(zip(*self.samples, strict=True)) or [[0.0]] * 3
        return {"sm_mhz_mean": round(statistics.mean(cols[0]), 1), "sm_mhz_min": min(cols[0]),
                "temp_c_max": max(cols[1]), "power_w_mean": round(statistics.mean(cols[2]), 1)}  # fmt: skip


def repeat_main(out: Path) -> None:
    """--repeat: plain C=1 three times back to back, then after capturing every bucket, each with
    the replay's GPU span and the GPU's SM clock, temperature and power over the run."""
    torch.manual_seed(0)
    model = Model(layers=61)
    free, _ = torch.cuda.mem_get_info()
    eng = Engine(model, pages=int(0.8 * (free - 12e9) / (2 * 61 * PAGE * 576)), budget=8192)
    _split(eng)
    rows: dict[str, Any] = {}
    for name in ("plain_1", "plain_2", "plain_3", "all_graphs"):
        if name == "all_graphs":
            for b in BUCKETS:
                eng._graph(b, len(eng.free) + 1)
        c = Clocks()
        rows[name] = _c1(eng) | c.done()
        print(name, rows[name], flush=True)
    out.write_text(json.dumps({"provenance": provenance() | {"command": "decode_harness_probe OUT --repeat"},
                               "c1_isl512": rows}, indent=1))  # fmt: skip


def split_main(out: Path) -> None:
    """--split: plain, all buckets captured, and all but bucket 1 dropped again, each with the
    replay's GPU span and Engine.decode's wall time."""
    torch.manual_seed(0)
    model = Model(layers=61)
    free, _ = torch.cuda.mem_get_info()
    eng = Engine(model, pages=int(0.8 * (free - 12e9) / (2 * 61 * PAGE * 576)), budget=8192)
    _split(eng)
    rows: dict[str, Any] = {"plain": _c1(eng)}
    print(rows, flush=True)
    for b in BUCKETS:
        eng._graph(b, len(eng.free) + 1)
    rows["all_graphs"] = _c1(eng)
    print(rows, flush=True)
    for b in [b for b in eng.graphs if b != 1]:
        del eng.graphs[b]
    gc.collect()
    torch.cuda.empty_cache()
    rows["graphs_dropped_but_bucket_1"] = _c1(eng)
    print(rows, flush=True)
    out.write_text(json.dumps({"provenance": provenance() | {"command": "decode_harness_probe OUT --split"},
                               "c1_isl512": rows}, indent=1))  # fmt: skip


def main() -> None:
    out = Path(sys.argv[1])
    if "--split" in sys.argv:
        split_main(out)
        return
    if "--repeat" in sys.argv:
        repeat_main(out)
        return
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
