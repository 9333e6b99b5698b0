"""Where a simulated anchor's time goes: for each anchor id given (or id prefix ending in `*`), the
planner's prediction (`planner.search.validate.predict_anchor`, unchanged) and, for every simulation
that prediction ran, a summary of its step log over the measured window: decode-only steps (count,
mean gap, mean batch) beside steps that carry prefill tokens (count, mean gap, mean prefill tokens,
share of the instances' time), and the TTFT/TPOT statistics the run measured. The log holds step end
times only, so a step's "gap" is the time since the same instance's previous step: its duration
while that instance is busy, plus the idle time before it otherwise (an idle prefill pool).

It is a diagnostic: it reads the simulator's own step log and prints it; it fits, edits or judges
nothing. Estimate-only anchors print their prediction without a step summary.

Usage: python bench/anchor_steps.py ID [ID ...] [--files validation/public/*.yaml]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from planner.inputs.scenario import load_yaml
from planner.search import anchor_sim, loadgen
from planner.search.validate import predict_anchor
from roofline.errors import PlannerError

ROOT = Path(__file__).resolve().parents[1]


def step_summary(result: Any) -> str:
    """One line on the measured window of a `SimResult`: decode-only vs prefill-carrying steps."""
    s = result.steps
    if not len(s):
        return "no steps"
    t0, t1 = result.window
    # a step's duration is the gap to the previous step of the same instance (column 1), not of the log
    dt = np.zeros(len(s))
    for uid in np.unique(s[:, 1]):
        rows = np.flatnonzero(s[:, 1] == uid)
        dt[rows] = np.diff(s[rows, 0], prepend=0.0)
    keep = (s[:, 0] >= t0) & (s[:, 0] <= t1)
    w, dtw = s[keep], dt[keep]
    pre = w[:, 4] > 0
    dec = ~pre
    total = float(dtw.sum()) or 1.0  # instance-seconds
    parts = [f"window {t0:.1f}-{t1:.1f} s, {len(w)} steps"]
    if dec.any():
        parts.append(
            f"decode-only {int(dec.sum())}: mean gap {dtw[dec].mean() * 1e3:.2f} ms, batch {w[dec, 2].mean():.1f}"
        )
    if pre.any():
        parts.append(
            f"with prefill {int(pre.sum())}: mean gap {dtw[pre].mean() * 1e3:.1f} ms, "
            f"{w[pre, 4].mean():.0f} prefill tokens, {dtw[pre].sum() / total:.0%} of the time"
        )
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ids", nargs="+", help="anchor ids (a trailing * matches a prefix)")
    ap.add_argument("--files", nargs="*", type=Path, default=sorted((ROOT / "validation" / "public").glob("*.yaml")))
    args = ap.parse_args(argv)
    runs: list[tuple[Any, dict[str, Any]]] = []
    original = anchor_sim.run_simulation  # the same function loadgen imports

    def recorded(*a: Any, **k: Any) -> tuple[Any, dict[str, Any]]:
        out = original(*a, **k)
        runs.append(out)
        return out

    def wanted(aid: str) -> bool:
        return any(aid == i or (i.endswith("*") and aid.startswith(i[:-1])) for i in args.ids)

    found = 0
    anchor_sim.run_simulation = loadgen.run_simulation = recorded
    try:
        for path in args.files:
            try:
                data = load_yaml(path)
            except PlannerError as exc:
                print(f"{path}: {exc}", file=sys.stderr)
                continue
            for raw in data.get("anchors", []) if isinstance(data, dict) else []:
                if not isinstance(raw, dict) or not wanted(str(raw.get("id"))):
                    continue
                found += 1
                runs.clear()
                r = predict_anchor(raw, path.parent)
                err = f"{r.rel_error:+.1%}" if r.rel_error is not None else r.error
                print(f"{r.id} {r.metric}: published {r.published}, predicted {r.predicted} ({err}, {r.method})")
                for result, m in runs:
                    print("  " + step_summary(result))
                    lat = {k: m[k] for k in ("ttft_ms", "tpot_ms") if isinstance(m.get(k), dict)}
                    print("  " + "; ".join(f"{k} mean {v['mean']:.2f} p50 {v['p50']:.2f}" for k, v in lat.items()))
    finally:
        anchor_sim.run_simulation = loadgen.run_simulation = original
    if not found:
        print("no anchor matches " + " ".join(args.ids), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
