"""Where closed-loop latency errors sit: end-to-end latency against its split into TTFT and decode.

For every pair of public anchors that publish TTFT and TPOT of one closed-loop run (same source, same id
but for the metric suffix, a stated concurrency, a fixed output length: no `simulation.output_len`), the
run's mean end-to-end latency is derived from the two published means, E2E = TTFT + (osl - 1) x TPOT
(the clients' own definition: AIPerf's ITL and the serving benchmarks' TPOT are (latency - TTFT) /
(output tokens - 1) per request, so with one output length the means add exactly), and the same from the
planner's two predictions in `bench/results/public_anchors.json` (read, not re-predicted). With the
concurrency C fixed, E2E sets the throughput (C / E2E requests/s) and the decode share of it sets how
many requests decode at once (C x (osl - 1) x TPOT / E2E, Little's law): a row whose E2E holds while its
TTFT misses puts the time in the wrong phase (too little waiting before the first token, too many
requests decoding at once), not too little time overall.

The table groups pairs by split, source file, aggregated or disaggregated, and concurrency band, with
median |error| and median signed error of E2E, TTFT and TPOT, and the count within 20%. It is a
diagnostic of the saved predictions; it fits nothing, and it adds no anchors (the derived E2E is not
scored anywhere).

Usage: python bench/latency_split.py [--results bench/results/public_anchors.json] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from planner.inputs.scenario import load_yaml
from roofline.errors import PlannerError

ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = (("-ttft-ms", "-tpot-ms"), ("-ttft", "-tpot"))
BANDS = ((8, "c<=8"), (64, "c<=64"), (1 << 30, "c>64"))
TOLERANCE = 0.2


def closed_loop_runs(files: list[Path]) -> dict[str, dict[str, Any]]:
    """TTFT anchor id -> its run (file, TPOT id, osl, concurrency, mode) for every TTFT anchor whose
    TPOT partner exists in the same file, at a stated total concurrency and a fixed output length."""
    runs: dict[str, dict[str, Any]] = {}
    for path in files:
        try:
            data = load_yaml(path)
        except PlannerError as exc:
            print(f"{path.name}: {exc}", file=sys.stderr)
            continue
        anchors = [a for a in data.get("anchors", []) if isinstance(a, dict)]
        ids = {a.get("id") for a in anchors}
        for a in anchors:
            aid, w = str(a.get("id")), a.get("workload") or {}
            conc, osl = w.get("concurrency"), w.get("osl")
            sim = a.get("simulation") or {}
            fixed = isinstance(osl, int) and osl > 1 and not sim.get("output_len")
            if a.get("metric") != "ttft_ms" or not isinstance(conc, int) or not fixed:
                continue
            if w.get("concurrency_scope", "total") != "total":
                continue
            partner = next((aid[: -len(t)] + p for t, p in SUFFIXES if aid.endswith(t)), None)
            if partner in ids:
                mode = "disagg" if "prefill" in (a.get("deployment") or {}) else "agg"
                runs[aid] = {"file": path.name, "tpot_id": partner, "osl": osl, "concurrency": conc, "mode": mode}
    return runs


def band(c: int) -> str:
    return next(name for top, name in BANDS if c <= top)


def pairs(results: dict[str, Any], runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per run with both predictions: published and predicted E2E and each part's error."""
    rows = {r["id"]: r for r in results["rows"]}
    out = []
    for aid, run in sorted(runs.items()):
        t, p = rows.get(aid), rows.get(run["tpot_id"])
        if not t or not p or t.get("predicted") is None or p.get("predicted") is None:
            continue
        n = run["osl"] - 1
        pub = t["published"] + n * p["published"]
        pred = t["predicted"] + n * p["predicted"]
        out.append(
            {
                "id": aid,
                "split": t["split"],
                **{k: run[k] for k in ("file", "mode", "concurrency")},
                "band": band(run["concurrency"]),
                "e2e_published_ms": pub,
                "e2e_predicted_ms": pred,
                "e2e": pred / pub - 1,
                "ttft": t["rel_error"],
                "tpot": p["rel_error"],
            }
        )
    return out


def table(split_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in split_rows:
        groups[(r["split"], r["file"], r["mode"], r["band"])].append(r)
        groups[(r["split"], "all", "all", "all")].append(r)
    out = []
    for (split, file, mode, b), rs in sorted(groups.items()):
        line: dict[str, Any] = {"split": split, "file": file, "mode": mode, "band": b, "runs": len(rs)}
        for part in ("e2e", "ttft", "tpot"):
            v = [r[part] for r in rs]
            line[part] = {
                "median_abs": statistics.median(abs(x) for x in v),
                "median_signed": statistics.median(v),
                "within": sum(abs(x) <= TOLERANCE for x in v),
            }
        out.append(line)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=ROOT / "bench" / "results" / "public_anchors.json")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "latency_split.json")
    args = ap.parse_args(argv)
    results = json.loads(args.results.read_text())
    runs = closed_loop_runs(sorted((ROOT / "validation" / "public").glob("*.yaml")))
    rows = pairs(results, runs)
    lines = table(rows)
    print(
        "| split | file | mode | band | runs | E2E med abs | E2E signed | TTFT med abs | TTFT signed | TPOT med abs"
        " | TPOT signed | E2E / TTFT / TPOT within 20% |"
    )
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for ln in lines:
        e, t, p = ln["e2e"], ln["ttft"], ln["tpot"]
        print(
            f"| {ln['split']} | {ln['file']} | {ln['mode']} | {ln['band']} | {ln['runs']} | {e['median_abs']:.1%}"
            f" | {e['median_signed']:+.1%} | {t['median_abs']:.1%} | {t['median_signed']:+.1%} | {p['median_abs']:.1%}"
            f" | {p['median_signed']:+.1%} | {e['within']} / {t['within']} / {p['within']} |"
        )
    source = args.results.relative_to(ROOT) if args.results.is_relative_to(ROOT) else args.results
    payload = {"results": str(source), "provenance": results.get("provenance", ""), "tables": lines, "rows": rows}
    tmp = args.out.with_suffix(".part")
    tmp.write_text(json.dumps(payload, indent=1))
    tmp.replace(args.out)
    print(f"saved {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out} ({len(rows)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
