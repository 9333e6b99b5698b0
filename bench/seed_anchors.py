"""Accuracy on an anchor file: prints a markdown table and saves bench/results/<file stem>.json.

Usage: python bench/seed_anchors.py [ANCHOR_FILE]   (default: ../shared/validation/seed_anchors.yaml)
"""

from __future__ import annotations

import json
import sys
from datetime import date
from pathlib import Path

from planner.search.validate import results_json, validate_file

ROOT = Path(__file__).resolve().parents[1]


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "validation" / "seed_anchors.yaml"
    results, summary = validate_file(path)
    print("| anchor | metric | published | predicted | error | tolerance | within |")
    print("|---|---|---:|---:|---:|---:|:---:|")
    for r in results:
        pred = "error" if r.predicted is None else _num(r.predicted)
        err = "-" if r.rel_error is None else f"{r.rel_error:+.1%}"
        print(
            f"| {r.id} | {r.metric} | {_num(r.published or 0)} | {pred} | {err} | {r.tolerance:.0%} | "
            f"{'yes' if r.within_tolerance else 'no'} |"
        )
    med = summary["median_abs_rel_error"]
    print(f"\n{summary['within_tolerance']} of {summary['count']} within tolerance, median |error| {med:.1%}")
    out = ROOT / "bench" / "results" / f"{path.stem}.json"
    out.write_text(
        json.dumps(
            {"date": date.today().isoformat(), "file": str(path.name), **results_json(results, summary)}, indent=2
        )
    )
    print(f"saved {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
