"""Plotly figures of the dashboard. Every axis has a title with its unit; every series is named
in a legend. Figures draw numbers they are given (records, breakdowns, time series); they
compute nothing but positions.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from planner.dashboard.whatif import STEP_CATEGORIES, Breakdown
from planner.report.plan_chart import pareto_figure as report_pareto_figure
from planner.report.plan_report import record, table_rows
from planner.search.plan import Answer

CATEGORY_COLORS = dict(
    zip(
        STEP_CATEGORIES,
        ("#4c78a8", "#9ecae9", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#b279a2", "#8c564b"),
        strict=True,
    )
)
MEMORY_PARTS = {  # MemoryPlan.breakdown_gb keys -> what the chart says
    "weights": "weights (resident)",
    "kv_pool": "KV cache pool",
    "comm_buffers": "communication buffers",
    "activations_and_graphs": "activations of the largest step",
    "unused_reserve": "reserve outside the memory fraction (unused)",
}


def pareto_figure(a: Answer, chosen: int | None = None) -> go.Figure:
    """The estimate fronts, the recommendations at the figures the table shows, the chosen one
    highlighted."""
    fig = report_pareto_figure(a)
    for trace in fig.data:  # the fronts are the search's estimates
        trace.name = f"{trace.name} front (estimates)"
    labels = {i: record(a, r, i)["label"] for i, r in enumerate(a.recommendations, 1)}
    rows = [r for r in table_rows(a) if r["tok/s/user"]]
    fig.add_trace(
        go.Scatter(
            x=[r["tok/s/user"] for r in rows],
            y=[r["tok/s/GPU"] for r in rows],
            mode="markers+text",
            name="recommendations (as in the table)",
            text=[f"#{r['#']}" for r in rows],
            textposition="top center",
            customdata=[[labels[r["#"]], r["figures"]] for r in rows],
            marker={"color": "#444", "size": 9, "symbol": "circle-open"},
            hovertemplate="%{text} %{customdata[0]}<br>%{x:.1f} tok/s/user, %{y:,.0f} tok/s/GPU"
            "<br>%{customdata[1]}<extra></extra>",
        )
    )
    if chosen is not None:
        row = next((r for r in rows if r["#"] == chosen + 1), None)
        if row:
            fig.add_trace(
                go.Scatter(
                    x=[row["tok/s/user"]],
                    y=[row["tok/s/GPU"]],
                    mode="markers",
                    name=f"chosen: #{chosen + 1}",
                    marker={"color": "#ff7f0e", "size": 18, "symbol": "star", "line": {"width": 1, "color": "#000"}},
                    hovertemplate=f"chosen #{chosen + 1} {labels[row['#']]}<extra></extra>",
                )
            )
    fig.update_layout(
        height=420,
        margin={"t": 30, "b": 40},
        legend={"orientation": "h", "y": -0.2},
        xaxis_title="output tokens/s per user (interactivity)",
        yaxis_title="output tokens/s per GPU (throughput)",
    )
    return fig


def breakdown_figure(items: list[tuple[str, Breakdown]]) -> go.Figure:
    """Stacked decode and prefill step times per deployment, with each step's hardware limit."""
    fig = go.Figure()
    xs = [f"{label}: {step}" for label, _ in items for step in ("decode", "prefill")]
    for cat in STEP_CATEGORIES:
        ys = [v for _, b in items for v in (b.decode_ms[cat], b.prefill_ms[cat])]
        if any(ys):
            fig.add_trace(go.Bar(name=cat.replace("_", " "), x=xs, y=ys, marker_color=CATEGORY_COLORS[cat]))
    limits = [v for _, b in items for v in (b.decode_limit_ms, b.prefill_limit_ms)]
    fig.add_trace(
        go.Scatter(
            name="hardware limit (speed of light)",
            x=xs,
            y=limits,
            mode="markers",
            marker={"symbol": "line-ew-open", "size": 40, "color": "black"},
        )
    )
    fig.update_layout(
        barmode="stack",
        yaxis_title="time per forward step (ms)",
        xaxis_title="deployment: step",
        height=380,
        margin={"t": 20},
    )
    return fig


def memory_figure(b: Breakdown) -> go.Figure:
    """Memory per GPU of each pool: resident parts stacked, weights offloaded to host beside
    them, and the GPU's capacity as a line."""
    fig = go.Figure()
    pools = list(b.memory)
    gb = {p: b.memory[p].breakdown_gb() for p in pools}
    for part, label in MEMORY_PARTS.items():
        fig.add_trace(go.Bar(name=label, x=pools, y=[gb[p][part] for p in pools], offsetgroup="gpu"))
    fig.add_trace(
        go.Bar(
            name="weights offloaded to host (streamed each step)",
            x=pools,
            y=[gb[p]["offloaded_to_host"] for p in pools],
            offsetgroup="host",
            marker_pattern_shape="/",
            marker_color="#bbbbbb",
        )
    )
    cap = max((b.memory[p].capacity_bytes for p in pools), default=0.0) / 1e9
    if cap:
        fig.add_hline(y=cap, line_dash="dash", line_color="black", annotation_text=f"GPU memory {cap:,.0f} GB")
    fig.update_layout(
        barmode="relative",
        yaxis_title="GB per GPU",
        xaxis_title="pool",
        height=340,
        margin={"t": 20},
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


def timeseries_figure(ts: dict[str, Any], slo: dict[str, float], planned_batch: float, stat: str = "p90") -> go.Figure:
    """Six panels over simulated time: queue, decode batch (with the record's batch), KV use,
    output throughput, TTFT and TPOT (each with its SLO line)."""
    from plotly.subplots import make_subplots  # noqa: PLC0415  (plotly submodule, loaded on use)

    waited = "" if max(ts["queue"], default=0) > 0 else " (none waited)"
    fig = make_subplots(
        rows=2,
        cols=3,
        shared_xaxes=True,
        subplot_titles=(f"requests waiting{waited}", "decode batch per instance", "KV pool use",
                        "output throughput", "TTFT of finished requests", "TPOT of finished requests"),
    )  # fmt: skip
    x = ts["time_s"]
    panels = [
        (1, 1, [("queue (max per interval)", ts["queue"])], "requests"),
        (1, 2, [("batch (max per interval)", ts["batch"])], "sequences"),
        (1, 3, [("KV use (max per interval)", [100 * v for v in ts["kv_fraction"]])], "% of KV pool"),
        (2, 1, [("output tokens/s (whole deployment)", ts["output_tok_s"])], "tokens/s"),
        (2, 2, [("TTFT (mean per interval)", ts["ttft_ms"])], "ms"),
        (2, 3, [("TPOT (mean per interval)", ts["tpot_ms"])], "ms"),
    ]
    for row, col, series, unit in panels:
        for name, y in series:
            fig.add_trace(go.Scatter(x=x, y=y, name=name, mode="lines"), row=row, col=col)
        fig.update_yaxes(title_text=unit, rangemode="tozero", row=row, col=col)
    fig.add_trace(
        go.Scatter(x=x, y=[planned_batch] * len(x), name="planned batch (record)", line={"dash": "dot"}),
        row=1,
        col=2,
    )
    for key, col in (("ttft_ms", 2), ("tpot_ms", 3)):
        if key in slo:
            fig.add_trace(
                go.Scatter(x=x, y=[slo[key]] * len(x), name=f"{key.split('_')[0].upper()} SLO {slo[key]:g} ms ({stat})",
                           line={"dash": "dash", "color": "#d62728"}),
                row=2,
                col=col,
            )  # fmt: skip
    fig.update_xaxes(title_text="simulated time (s)", row=2)
    fig.update_layout(height=620, showlegend=True, legend={"orientation": "h", "y": -0.15}, margin={"t": 40})
    return fig


def validation_figure(rows: list[dict[str, Any]]) -> go.Figure:
    fig = go.Figure()
    for ok, name, color in ((True, "within tolerance", "#54a24b"), (False, "outside tolerance", "#e45756")):
        pts = [r for r in rows if r["within tolerance"] is ok and r["predicted"] is not None and r["published"]]
        fig.add_trace(
            go.Scatter(
                x=[r["published"] for r in pts],
                y=[r["predicted"] for r in pts],
                mode="markers",
                name=name,
                text=[f"{r['anchor']} ({r['metric']})" for r in pts],
                marker={"color": color, "size": 10},
                hovertemplate="%{text}<br>published %{x:,.4g}<br>predicted %{y:,.4g}<extra></extra>",
            )
        )
    vals = [v for r in rows if r["predicted"] is not None and r["published"] for v in (r["published"], r["predicted"])]
    lo, hi = (min(vals), max(vals)) if vals else (0.1, 1.0)
    fig.add_trace(
        go.Scatter(
            x=[lo, hi], y=[lo, hi], mode="lines", line={"dash": "dash", "color": "grey"}, name="predicted = published"
        )
    )
    fig.update_layout(
        xaxis_type="log",
        yaxis_type="log",
        height=450,
        legend={"orientation": "h", "y": -0.2},
        xaxis_title="published value (the anchor's metric, its unit)",
        yaxis_title="predicted value (same metric and unit)",
    )
    return fig
