"""The model's track record on public results, by class, for the planner to print beside its figures.

Reads bench/results/public_anchors.json (what `bench/public_anchors.py` last read) and the anchor files it
names (each anchor's engine and whether it states an aggregated or a disaggregated deployment), groups the
predicted anchors by split, metric kind (TTFT; TPOT, with tok/s per user; throughput; E2E), deployment
mode, engine and GPU generation (Hopper sm_90, Blackwell sm_100/sm_103, RTX PRO sm_120), and writes each
group's count, median |error|, median signed error and share within tolerance to
planner/report/track_record.json (`planner.report.track_record` reads it). Counts and medians only: it
fits nothing and predicts nothing. Prints the test split's groups as a table.

Usage: python bench/track_record.py [RESULTS_JSON]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from planner.report.track_record import GENERATION, class_keys
from roofline.catalog import get_hardware
from roofline.errors import PlannerError

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "public_anchors.json"
OUT = ROOT / "planner" / "report" / "track_record.json"
KINDS = {
    "ttft_ms": "ttft",
    "tpot_ms": "tpot",
    "output_tok_s_per_user": "tpot",  # a per-user decode speed: 1 / TPOT
    "e2e_ms": "e2e",
}  # every other metric (tok/s, tok/s per GPU, input or output) is throughput


def _anchor_facts(files: list[str]) -> dict[str, tuple[str, str]]:
    """(engine, mode) of every anchor id in `files`; mode: aggregated | disaggregated, the phase of a
    one-phase anchor (prefill | decode), or unknown."""
    out: dict[str, tuple[str, str]] = {}
    for name in files:
        doc = yaml.safe_load((ROOT / name).read_text())
        for a in doc.get("anchors") or []:
            dep = a.get("deployment") or {}
            keys = set(dep) if isinstance(dep, dict) else set()
            phase = a.get("phase")
            mode = "disaggregated" if keys & {"prefill", "decode"} and phase == "end-to-end" else "unknown"
            mode = phase if phase in ("prefill", "decode") else "aggregated" if "aggregated" in keys else mode
            out[a["id"]] = (str(a.get("engine", "unknown")), mode)
    return out


def _generation(hardware: str) -> str:
    try:
        return GENERATION.get(get_hardware(hardware).arch, "other")
    except PlannerError:  # a hardware id the catalog no longer has: its rows count without a generation
        return "other"


def groups(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Every class with its statistics; `None` in a key field means any value (the less specific classes)."""
    facts = _anchor_facts(data["files"])
    by: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in data["rows"]:
        if r.get("rel_error") is None or r["id"] not in facts:
            continue
        engine, mode = facts[r["id"]]
        kind, gen = KINDS.get(r["metric"], "throughput"), _generation(r["hardware"])
        for key in class_keys(mode, engine, gen):
            by[(r["split"], kind, *key)].append(r)
    out = []
    for (split, kind, mode, engine, gen), rows in sorted(by.items(), key=lambda kv: [str(k) for k in kv[0]]):
        errors = [r["rel_error"] for r in rows]
        out.append(
            {
                "split": split,
                "kind": kind,
                "mode": mode,
                "engine": engine,
                "generation": gen,
                "count": len(rows),
                "median_abs_rel_error": round(statistics.median(abs(e) for e in errors), 4),
                "median_rel_error": round(statistics.median(errors), 4),
                "within_tolerance": round(sum(bool(r["within_tolerance"]) for r in rows) / len(rows), 4),
            }
        )
    return out


def main(path: Path) -> None:
    data = json.loads(path.read_text())
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT, check=False
    )
    record = {
        "source": f"bench/track_record.py over {path.relative_to(ROOT)} (git {commit.stdout.strip() or 'unknown'})",
        "classes": groups(data),
    }
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print("| kind | mode | engine | generation | anchors | median abs error | median signed | within |")
    print("|---|---|---|---|---:|---:|---:|---:|")
    for c in record["classes"]:
        if c["split"] == "test" and c["mode"] is not None:
            cells = [c["kind"], c["mode"], c["engine"] or "any", c["generation"] or "any", str(c["count"])]
            cells += [f"{100 * c['median_abs_rel_error']:.1f}%", f"{100 * c['median_rel_error']:+.1f}%"]
            print("| " + " | ".join([*cells, f"{100 * c['within_tolerance']:.0f}%"]) + " |")
    print(f"wrote {OUT.relative_to(ROOT)} ({len(record['classes'])} classes)")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else RESULTS)
