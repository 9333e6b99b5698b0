"""Fit a communication profile (`runtime.comm_sweep`) into link efficiencies and latencies.

Per op and world size, least squares on t = latency + wire bytes / (link bandwidth x efficiency)
over the CUDA-graph replay times (on NCCL, points whose capture failed, timed eagerly with the
harness's host launch and sync costs, are not fitted),
with the wire bytes each op puts on the slowest rank's link:
- all_reduce (ring): 2 (n-1)/n x buffer;  all_gather: (n-1) x per-rank buffer;
- ep_dispatch / ep_combine: token rows the busiest rank receives from other ranks x hidden x payload
  bytes (1 fp8, 2 bf16): the bytes the step model's all-to-all carries (the fixed-capacity path's
  padding and packed ids/weights count against its efficiency); the host-split reference points
  (ep_*_host) are kept in the profile for comparison and not fitted;
- kv_transfer: the buffer.
The link is the hardware's NVLink per-direction bandwidth. Output: roofline/calibrated/<hw id>-comm.json,
which roofline.comm uses in place of its priors for that hardware (and says so). Without such a
file (no multi-GPU machine measured yet) the priors stand.

With `--ep-path p2p` the peer-to-peer points (runtime.comm_p2p, ep_*_p2p) are the EP all-to-all.

Usage: python -m calibration.comm_fit PROFILE.json --hardware h200-sxm [--out FILE] [--kinds allreduce,kv]
       [--ep-path nccl|p2p]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from roofline.catalog import get_hardware
from roofline.errors import PlannerError

OUT_DIR = Path(__file__).resolve().parents[1] / "roofline" / "calibrated"
OP_KIND = {"all_reduce": "allreduce", "all_gather": "allreduce", "ep_dispatch": "a2a", "ep_combine": "a2a",
           "kv_transfer": "kv"}  # fmt: skip


def _op(p: dict[str, Any], ep_path: str) -> str:
    """The op a point stands for: with ep_path "p2p" the peer-to-peer points (ep_*_p2p) are the
    all-to-all and the NCCL ones are not fitted, else the reverse."""
    op = p["op"]
    if op.endswith("_p2p"):
        return op[: -len("_p2p")] if ep_path == "p2p" else op
    return op + "_nccl" if ep_path == "p2p" and op in ("ep_dispatch", "ep_combine") else op


def wire_bytes(p: dict[str, Any]) -> float:
    n = p["world"]
    if p["op"] == "all_reduce":
        return 2.0 * (n - 1) / n * p["bytes"]
    if p["op"] == "all_gather":
        return float((n - 1) * p["bytes"])
    if p["op"].removesuffix("_p2p") in ("ep_dispatch", "ep_combine"):
        rows = p["max_remote_rows"] if "max_remote_rows" in p else p["max_rows_received"]  # older profiles
        fp8 = p["payload"] == "fp8" and p["op"].startswith("ep_dispatch")  # combine returns bf16 either way
        return float(rows * p["hidden"] * (1 if fp8 else 2))
    return float(p["bytes"])


def fit(profile: dict[str, Any], link_bytes_per_s: float, kinds: tuple[str, ...] | None = None,
        ep_path: str = "nccl") -> dict[str, Any]:  # fmt: skip
    """{kind: {world: {efficiency, latency_s, points, median_abs_error}}} from the points (of `kinds`
    only, when given: a kind left out keeps roofline.comm's prior); `ep_path` picks which EP path's
    points are the all-to-all ("nccl": runtime.comm, "p2p": runtime.comm_p2p)."""
    groups: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    gpu = profile["provenance"].get("backend") == "nccl"
    for p in profile["points"]:
        op = _op(p, ep_path)
        if op not in OP_KIND or "ms" not in p or (gpu and p.get("timing", "cuda-graph") == "eager"):
            continue  # on GPUs, fitted as engines run them: CUDA-graph replays (old profiles: no timing field)
        if kinds is not None and OP_KIND[op] not in kinds:
            continue
        groups[(OP_KIND[op], p["world"])].append((wire_bytes(p), p["ms"] * 1e-3))
    out: dict[str, Any] = defaultdict(dict)
    for (kind, world), pts in sorted(groups.items()):
        b, t = np.array([x for x, _ in pts]), np.array([y for _, y in pts])
        a = np.stack([np.ones_like(b), b], axis=1)
        (lat, inv_bw), *_ = np.linalg.lstsq(a, t, rcond=None)
        lat, inv_bw = max(float(lat), 0.0), max(float(inv_bw), 1e-18)
        pred = lat + b * inv_bw
        out[kind][str(world)] = {
            "efficiency": min(1.0 / inv_bw / link_bytes_per_s, 1.0),
            "latency_s": lat,
            "points": len(pts),
            "median_abs_error": float(np.median(np.abs(pred - t) / t)),
        }
    return dict(out)


def write(profile: dict[str, Any], hardware: str, out: Path | None = None, kinds: tuple[str, ...] | None = None,
          ep_path: str = "nccl") -> Path:  # fmt: skip
    """Fit `profile` for catalog hardware `hardware` and write it where roofline.comm reads it."""
    hw = get_hardware(hardware)
    link = hw.scaleup.bw_gbps_unidir * 1e9
    prov = {**profile["provenance"], "ep_path": ep_path}
    res = {"hardware": hw.id, "provenance": prov, "fit": fit(profile, link, kinds, ep_path)}
    path = out or OUT_DIR / f"{hw.id}-comm.json"  # the catalog id, as roofline.comm looks it up
    path.write_text(json.dumps(res, indent=1))
    return path


def _kinds(arg: str | None) -> tuple[str, ...] | None:
    kinds = tuple(arg.split(",")) if arg else None
    if kinds and not set(kinds) <= set(OP_KIND.values()):
        raise ValueError(f"--kinds: unknown {sorted(set(kinds) - set(OP_KIND.values()))}")
    return kinds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("profile", type=Path)
    ap.add_argument("--hardware", required=True)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--kinds", help=f"comma-separated subset of {sorted(set(OP_KIND.values()))} to fit")
    ap.add_argument("--ep-path", choices=("nccl", "p2p"), default="nccl", help="which EP path is the all-to-all")
    a = ap.parse_args()
    try:
        profile = json.loads(a.profile.read_text())
        out = write(profile, a.hardware, a.out, _kinds(a.kinds), a.ep_path)
    except (OSError, ValueError, KeyError, PlannerError) as exc:  # unreadable profile, unknown hardware, ...
        print(f"comm_fit: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(2)
    res = json.loads(out.read_text())
    for kind, worlds in res["fit"].items():
        for w, f in worlds.items():
            print(f"{kind} x{w}: efficiency {f['efficiency']:.2f}, latency {f['latency_s'] * 1e6:.1f} us, "
                  f"{f['points']} points, median error {f['median_abs_error']:.1%}")  # fmt: skip


if __name__ == "__main__":
    main()
