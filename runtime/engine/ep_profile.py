"""Kernels per MoE layer that the expert-parallel engine adds over the single-GPU one, counted
with torch.profiler on the GPUs (every rank runs the same steps): a MoE layer's FFN of
`runtime.engine.ep_model` (router over all experts, dispatch, local pairs, grouped experts,
combine), the dispatch + combine alone (the step model prices those from the communication
profile), and the single-GPU layer's FFN. extra = EP FFN - dispatch/combine - single FFN: the
kernels the step model must count as the EP engine's own elementwise launches.

Usage (on `world` GPUs): python -m runtime.engine.ep_profile OUT.json [--world 2] [--tokens 8]
"""

from __future__ import annotations

import argparse
import json
import socket
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from runtime import comm
from runtime.engine.ep_model import EPModel
from runtime.engine.model import H, Layer
from runtime.engine.profile import kernels


def _worker(rank: int, world: int, port: int, tokens: list[int], q: Any) -> None:
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        ep = EPModel(world, layers=1, dense_layers=0).layers[0]
        single = Layer(False, "cuda")
        rows = []
        for t in tokens:
            x = torch.randn(t, H, device="cuda", dtype=torch.bfloat16)
            ep.step["cap"] = t
            ids = torch.randint(0, 32 * world, (t, world), device="cuda")
            w = torch.full((t, world), 1.0 / world, device="cuda")

            def dc() -> None:
                d = comm.dispatch(x, ids, w, 32 * world, capacity=t)  # noqa: B023
                comm.combine(d.hidden_states(), d)

            for fn in (lambda: ep.ffn(x), dc, lambda: single.ffn(x)):  # noqa: B023  (warm-up: JIT, allocator)
                fn()
            n_ep, n_dc, n_one = kernels(lambda: ep.ffn(x)), kernels(dc), kernels(lambda: single.ffn(x))  # noqa: B023
            rows.append({"tokens": t, "ep_ffn": n_ep, "dispatch_combine": n_dc, "single_ffn": n_one,
                         "extra": n_ep - n_dc - n_one})  # fmt: skip
        if rank == 0:
            q.put(rows)
    except Exception as exc:
        q.put(f"rank {rank}: {exc!r}")
        raise
    finally:
        dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", type=Path)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--tokens", default="1,8,64,512", help="comma-separated tokens per rank")
    a = ap.parse_args()
    tokens = [int(t) for t in a.tokens.split(",")]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(r, a.world, port, tokens, q)) for r in range(a.world)]
    for p in procs:
        p.start()
    rows = q.get(timeout=600)
    for p in procs:
        p.join(timeout=60)
    if isinstance(rows, str):
        raise SystemExit(f"ep_profile: {rows}")
    from runtime.sweep import provenance  # noqa: PLC0415

    prov = provenance() | {"command": f"python -m runtime.engine.ep_profile OUT --world {a.world}", "world": a.world}
    a.out.write_text(json.dumps({"provenance": prov, "kernels_per_moe_layer": rows}, indent=1))
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
