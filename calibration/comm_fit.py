"""Fit a communication profile (`runtime.comm_sweep`) into link efficiencies and latencies.

Per op and world size, least squares on t = latency + wire bytes / (link bandwidth x efficiency),
with the wire bytes each op puts on the slowest rank's link:
- all_reduce (ring): 2 (n-1)/n x buffer;  all_gather: (n-1) x per-rank buffer;
- ep_dispatch / ep_combine: rows the busiest rank receives x hidden x payload bytes (1 fp8, 2 bf16);
- kv_transfer: the buffer.
The link is the hardware's NVLink per-direction bandwidth. Output: roofline/calibrated/<hw>-comm.json,
which roofline.comm uses in place of its priors for that hardware (and says so). Without such a
file (no multi-GPU machine measured yet) the priors stand.

Usage: python -m calibration.comm_fit PROFILE.json --hardware h200-sxm [--out FILE]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from roofline.catalog import get_hardware

OUT_DIR = Path(__file__).resolve().parents[1] / "roofline" / "calibrated"
OP_KIND = {"all_reduce": "allreduce", "all_gather": "allreduce", "ep_dispatch": "a2a", "ep_combine": "a2a",
           "kv_transfer": "kv"}  # fmt: skip


def wire_bytes(p: dict[str, Any]) -> float:
    n = p["world"]
    if p["op"] == "all_reduce":
        return 2.0 * (n - 1) / n * p["bytes"]
    if p["op"] == "all_gather":
        return float((n - 1) * p["bytes"])
    if p["op"] in ("ep_dispatch", "ep_combine"):
        return float(p["max_rows_received"] * p["hidden"] * (1 if p["payload"] == "fp8" else 2))
    return float(p["bytes"])


def fit(profile: dict[str, Any], link_bytes_per_s: float) -> dict[str, Any]:
    """{kind: {world: {efficiency, latency_s, points, median_abs_error}}} from the points."""
    groups: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    for p in profile["points"]:
        groups[(OP_KIND[p["op"]], p["world"])].append((wire_bytes(p), p["ms"] * 1e-3))
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("profile", type=Path)
    ap.add_argument("--hardware", required=True)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    hw = get_hardware(a.hardware)
    prof = json.loads(a.profile.read_text())
    res = {"hardware": hw.name, "provenance": prof["provenance"], "fit": fit(prof, hw.scaleup.bw_gbps_unidir * 1e9)}
    out = a.out or OUT_DIR / f"{hw.name}-comm.json"
    out.write_text(json.dumps(res, indent=1))
    for kind, worlds in res["fit"].items():
        for w, f in worlds.items():
            print(f"{kind} x{w}: efficiency {f['efficiency']:.2f}, latency {f['latency_s'] * 1e6:.1f} us, "
                  f"{f['points']} points, median error {f['median_abs_error']:.1%}")  # fmt: skip


if __name__ == "__main__":
    main()
