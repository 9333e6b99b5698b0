"""The "which GPU?" page's content, from `planner.search.compare` (the CLI's `planner compare`): each
system's frontier as rows and a chart. The rows render `compare_dict`; nothing is recomputed.
All figures are estimates (the compare search does not simulate), and the page says so.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from planner.search.compare import Frontier, compare_dict, compare_figure


def summary_rows(fronts: list[Frontier], prices: dict[str, float], min_user: float) -> list[dict[str, Any]]:
    """Per system: the best throughput per GPU among frontier points at least `min_user` tok/s
    per user, with its deployment and cost; or why the system has no frontier."""
    rows = []
    for h in compare_dict(fronts, prices)["hardware"]:
        ok = [p for p in h["frontier"] if p["output_tok_s_per_user"] >= min_user]
        best = max(ok, key=lambda p: p["output_tok_s_per_gpu"], default=None)
        rows.append(
            {
                "hardware": h["hardware"],
                "GPUs searched": h["gpus_searched"],
                "best tok/s/GPU (estimate)": None if best is None else round(best["output_tok_s_per_gpu"], 1),
                "tok/s/user there": None if best is None else round(best["output_tok_s_per_user"], 1),
                "deployment": "" if best is None else best["deployment"],
                "kernels": h["kernels"],
                "runtime": h["runtime"] or "",  # what the engine runs differently there (eager launches)
                "$/Mtok": None
                if best is None or best["usd_per_million_output_tokens"] is None
                else round(best["usd_per_million_output_tokens"], 3),
                "why none": h["reason"] or ("" if best else f"no point at >= {min_user:g} tok/s/user"),
            }
        )
    return sorted(rows, key=lambda r: -(r["best tok/s/GPU (estimate)"] or 0.0))


def figure(fronts: list[Frontier], min_user: float) -> go.Figure:
    fig = compare_figure(fronts, "throughput per GPU vs interactivity, per system (estimates)")
    if min_user > 0:
        fig.add_vline(x=min_user, line_dash="dash", annotation_text=f"{min_user:g} tok/s/user")
    fig.update_layout(
        xaxis_title="output tokens/s per user (interactivity)",
        yaxis_title="output tokens/s per GPU (log scale)",
        height=480,
        legend={"orientation": "h", "y": -0.2},
    )
    return fig
