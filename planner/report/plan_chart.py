"""The plan's Pareto fronts as a plotly figure (output tok/s per GPU against per user, the TPOT target as a line)
and as a standalone HTML page (`planner plan --chart`); the dashboard draws the same figure. Presentation only."""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go

from planner.search.plan import Answer

MODE_COLORS = {"aggregated": "#1f77b4", "disaggregated": "#d62728"}


def pareto_figure(a: Answer) -> go.Figure:
    """Pareto fronts of both modes (output tok/s per GPU vs per user), with the TPOT target as a
    vertical line; hover shows the deployment."""
    fig = go.Figure()
    for mode, front in a.fronts.items():
        fig.add_trace(
            go.Scatter(
                x=[u for u, _, _ in front],
                y=[g for _, g, _ in front],
                mode="lines+markers",
                name=mode,
                text=[lab for _, _, lab in front],
                line={"color": MODE_COLORS.get(mode)},
                hovertemplate="%{text}<br>%{x:.1f} tok/s/user<br>%{y:,.0f} tok/s/GPU<extra></extra>",
            )
        )
    tpot, stat = a.question.slo.target("tpot"), a.question.slo.statistic
    if tpot:
        fig.add_vline(x=1000 / tpot, line_dash="dash", annotation_text=f"TPOT {stat} SLO {tpot:g} ms")
    fig.update_layout(xaxis_title="output tok/s per user", yaxis_title="output tok/s per GPU")
    return fig


def write_chart(a: Answer, path: Path) -> None:
    """The Pareto figure as a standalone plotly HTML page, written atomically."""
    fig = pareto_figure(a)
    fig.update_layout(title=f"{a.question.model} on {a.question.hardware}: throughput vs interactivity")
    tmp = path.with_name(path.name + ".part")
    fig.write_html(str(tmp), include_plotlyjs=True)
    tmp.replace(path)
