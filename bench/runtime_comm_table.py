"""Dispatch/combine latency and bandwidth vs message size from a communication profile
(`runtime.comm_sweep`), as a JSON table in bench/results/ and a markdown table on stdout.

Bandwidth is the token rows the busiest rank received from other ranks times the payload bytes
per row, over the time: what the link carried for the MoE, not the fixed-capacity padding.
Usage: python bench/runtime_comm_table.py PROFILE.json [--out bench/results/comm_ep_world2.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def rows(profile: dict[str, Any]) -> list[dict[str, Any]]:
    pts = profile["points"]
    by = {(p["op"], p["world"], p["tokens_per_rank"], p["payload"]): p for p in pts if p["op"].startswith("ep_")}
    out = []
    for (op, world, tokens, payload), p in sorted(by.items(), key=lambda kv: (kv[0][1], kv[0][3], kv[0][2], kv[0][0])):
        if op not in ("ep_dispatch", "ep_combine", "ep_dispatch_p2p", "ep_combine_p2p") or "ms" not in p:
            continue  # the host-split reference rows are a column; a p2p point that failed has no time
        host = by.get((op + "_host", world, tokens, payload))
        moved = p["max_remote_rows"] * p["hidden"] * (1 if payload == "fp8" and op == "ep_dispatch" else 2)
        label = payload if op.startswith("ep_dispatch") else f"bf16 (after {payload} dispatch)"
        out.append(
            {
                "op": op,
                "world": world,
                "tokens_per_rank": tokens,
                "payload": label,
                "us": round(p["ms"] * 1e3, 1),
                "timing": p["timing"],
                "eager_us": round(p.get("ms_eager", p["ms"]) * 1e3, 1),
                "host_split_us": round(host["ms"] * 1e3, 1) if host else None,
                "remote_mb": round(moved / 1e6, 2),
                "gb_s": round(moved / (p["ms"] * 1e-3) / 1e9, 1),
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("profile", type=Path)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "comm_ep_world2.json")
    a = ap.parse_args()
    prof = json.loads(a.profile.read_text())
    table = rows(prof)
    a.out.write_text(json.dumps({"provenance": prof["provenance"], "profile": a.profile.name, "rows": table}, indent=1))
    print("| op | tokens/rank | payload | us | timed as | eager us | host-split us | remote MB | GB/s |")
    print("|---|---:|---|---:|---|---:|---:|---:|---:|")
    for r in table:
        host = "-" if r["host_split_us"] is None else f"{r['host_split_us']:,.1f}"
        head = f"| {r['op']} | {r['tokens_per_rank']} | {r['payload']} | {r['us']:,.1f} | {r['timing']} "
        print(f"{head}| {r['eager_us']:,.1f} | "
              f"{host} | {r['remote_mb']} | {r['gb_s']} |")  # fmt: skip


if __name__ == "__main__":
    main()
