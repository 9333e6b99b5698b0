"""Print the README's public-anchor tables (split totals; split x metric; TTFT/TPOT by the traffic an
anchor states) as Markdown from bench/results/public_anchors.json, which `bench/public_anchors.py`
writes. It computes nothing of its own: every cell is a count or a median that file holds.

Usage: python bench/readme_tables.py [RESULTS_JSON]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "public_anchors.json"
TRAFFIC = {"concurrency": "concurrency", "request_rate": "request rate", "none": "none (read as one request)"}


def _row(label: str, r: dict[str, Any], signed: bool = True) -> str:
    cells = [label, f"{r['count']:,}", f"{r['predicted']:,}", f"{r['within_tolerance']:,}"]
    cells.append(f"{100 * r['median_abs_rel_error']:.1f}%")
    if signed:
        cells.append(f"{100 * r['median_rel_error']:+.1f}%")
    return "| " + " | ".join(cells) + " |"


def tables(data: dict[str, Any]) -> str:
    splits = [s for s in ("train", "test") if s in data["tables"]]
    out = ["| split | anchors | predicted | within tolerance | median abs error |", "|---|---:|---:|---:|---:|"]
    out += [_row(s, data["tables"][s]["all"], signed=False) for s in splits]
    head = "| {} | count | predicted | within | median abs error | median signed error |"
    out += ["", head.format("split, metric"), "|---|---:|---:|---:|---:|---:|"]
    for s in splits:
        for metric, r in sorted(data["tables"][s]["by"]["metric"].items()):
            out.append(_row(f"{s}, {metric}", r))
    out += ["", head.format("split, metric, traffic stated"), "|---|---:|---:|---:|---:|---:|"]
    for s in splits:
        for metric, by in data["tables"][s]["latency_by_traffic"].items():
            for traffic, r in by.items():
                out.append(_row(f"{s}, {metric}, {TRAFFIC.get(traffic, traffic)}", r))
    return "\n".join(out)


if __name__ == "__main__":
    print(tables(json.loads(Path(sys.argv[1] if len(sys.argv) > 1 else RESULTS).read_text())))
