"""Time `planner compare` (which GPU?) for DeepSeek-V3 at 1k/1k over every catalog system, the
issue's target being at most 60 s on 2 cores. Prints a table and saves
bench/results/compare_speed.json."""

from __future__ import annotations

import json
import time
from pathlib import Path

from planner.search.compare import compare

OUT = Path(__file__).parent / "results" / "compare_speed.json"


def main() -> None:
    t0, c0 = time.perf_counter(), time.process_time()
    fronts = compare("deepseek-v3", 1024, 1024, "sglang")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rows = []
    print("| hardware | GPUs searched | frontier points | best tok/s/GPU | best tok/s/user |")
    print("|---|---:|---:|---:|---:|")
    for f in fronts:
        best_gpu = max((g for _, g, _ in f.points), default=0.0)
        best_user = max((u for u, _, _ in f.points), default=0.0)
        rows.append(
            {
                "hardware": f.hardware,
                "gpus": f.gpus,
                "points": len(f.points),
                "reason": f.reason,
                "best_tok_s_per_gpu": best_gpu,
                "best_tok_s_per_user": best_user,
            }
        )
        print(f"| {f.hardware} | {f.gpus} | {len(f.points)} | {best_gpu:,.0f} | {best_user:,.1f} |")
    print(f"\ncompare deepseek-v3 1k/1k, {len(fronts)} systems: {wall:.1f} s wall, {cpu:.1f} s CPU")
    OUT.parent.mkdir(exist_ok=True)
    tmp = OUT.with_name(OUT.name + ".part")
    tmp.write_text(json.dumps({"wall_s": wall, "cpu_s": cpu, "rows": rows}, indent=2))
    tmp.replace(OUT)


if __name__ == "__main__":
    main()
