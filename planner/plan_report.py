"""Render a planning answer: ranked recommendations, Pareto fronts, launch commands, JSON and an
HTML chart (plotly). Presentation only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from rich.console import Console
from rich.table import Table

from planner.launch import launch_commands
from planner.plan import Answer, Recommendation, cost_per_mtok, describe

SLO_NAMES = {"ttft_p90_ms": "TTFT", "tpot_p90_ms": "TPOT", "e2e_p90_ms": "E2E"}


def headroom(a: Answer, r: Recommendation) -> dict[str, float]:
    """Target / predicted - 1 per SLO: from the simulator's p90 where it verified this
    recommendation, else from the stage-1 estimate."""
    targets = a.question.slo.targets()
    out = {}
    for k, slack in r.point.slack.items():
        sim = getattr(r.verified, k, None) if r.verified is not None else None
        out[k] = (targets[k] / sim if sim else slack) - 1
    return out


def rec_dict(a: Answer, r: Recommendation) -> dict[str, Any]:
    p, c, v = r.point, r.cand, r.verified
    return {
        "deployment": describe(c, p),
        "mode": c.mode,
        "gpus": p.gpus,
        "decode_layout": c.decode.label,
        "prefill_layout": c.prefill.label if c.prefill else None,
        "decode_instances": p.decode_instances,
        "prefill_instances": p.prefill_instances,
        "precision": c.precision.model_dump(),
        "mtp": c.mtp,
        "kv_mem_fraction": c.mem_fraction,
        "batch_per_instance": p.batch,
        "estimate": {
            "ttft_ms": p.ttft_s * 1e3,
            "tpot_ms": p.tpot_s * 1e3,
            "e2e_ms": p.e2e_s * 1e3,
            "output_tok_s_per_gpu": p.out_tok_s_per_gpu,
            "output_tok_s_per_user": p.out_tok_s_per_user,
            "output_tok_s": p.out_tok_s,
        },
        "simulated_p90": None
        if v is None
        else {
            "ttft_ms": v.ttft_p90_ms,
            "tpot_ms": v.tpot_p90_ms,
            "e2e_ms": v.e2e_p90_ms,
            "output_tok_s_per_gpu": v.out_tok_s_per_gpu,
            "meets_slo": v.meets,
            "requests": v.requests,
        },
        "headroom": {SLO_NAMES[k]: round(h, 4) for k, h in headroom(a, r).items()},
        "bottleneck": p.bottleneck,
        "usd_per_million_output_tokens": cost_per_mtok(a.question, p),
        "binding_constraint": r.binding or None,
    }


def answer_dict(a: Answer, launch_top: int = 3) -> dict[str, Any]:
    recs = [rec_dict(a, r) for r in a.recommendations]
    for r, d in zip(a.recommendations[:launch_top], recs, strict=False):
        d["launch"] = launch_commands(a.question, r.cand, r.point)
    return {
        "question": a.question.model_dump(exclude={"simulation"}),
        "feasible": a.feasible,
        "notes": a.notes,
        "candidates": {"scored": a.scored, "pruned": dict(a.pruned), "simulated": a.simulated},
        "recommendations": recs,
        "pareto": {
            mode: [{"output_tok_s_per_user": u, "output_tok_s_per_gpu": g, "deployment": lab} for u, g, lab in front]
            for mode, front in a.fronts.items()
        },
    }


def print_answer(con: Console, a: Answer, top: int = 8) -> None:
    q = a.question
    con.print(
        f"[bold]{q.model} on {q.hardware}[/bold], budget {q.budget} GPUs, {q.isl}/{q.osl} tokens, "
        f"SLO {', '.join(f'{SLO_NAMES[k]} p90 <= {v:g} ms' for k, v in q.slo.targets().items()) or 'none'}, "
        f"optimize {q.optimize}"
    )
    pruned = ", ".join(f"{n} {why}" for why, n in a.pruned.most_common()) or "none"
    con.print(f"{a.scored} candidates scored, pruned: {pruned}; {a.simulated} simulated")
    if not a.feasible:
        con.print("[yellow]" + "; ".join(a.notes) + "[/yellow]")
    title = "recommendations" if a.feasible else "closest configuration"
    t = Table(title=f"{title} (precision: attention/KV/experts; p90s simulated where sim says so)")
    for col in (
        "#",
        "deployment",
        "GPUs",
        "precision",
        "MTP",
        "batch",
        "TTFT p90",
        "TPOT p90",
        "tok/s/GPU",
        "tok/s/user",
        "SLO headroom",
        "bottleneck",
        "$/Mtok",
        "sim",
    ):
        left = col in ("deployment", "precision", "SLO headroom", "bottleneck")
        t.add_column(col, justify="left" if left else "right", no_wrap=col != "deployment")
    for i, r in enumerate(a.recommendations[:top], 1):
        p, v = r.point, r.verified
        ttft = v.ttft_p90_ms if v and v.ttft_p90_ms is not None else p.ttft_s * 1e3
        tpot = v.tpot_p90_ms if v and v.tpot_p90_ms is not None else p.tpot_s * 1e3
        head = " ".join(f"{SLO_NAMES[k]}{h:+.0%}" for k, h in headroom(a, r).items())
        if r.binding:
            head += f" (binds: {SLO_NAMES.get(r.binding, r.binding)})"
        sim = "-" if v is None else ("[green]meets[/green]" if v.meets else "[red]misses[/red]")
        prec = f"{r.cand.precision.attention}/{r.cand.precision.kv_cache}/{r.cand.precision.moe}"
        t.add_row(
            str(i),
            describe(r.cand, p),
            str(p.gpus),
            prec,
            "yes" if r.cand.mtp else "no",
            f"{p.batch:,}",
            f"{ttft:,.0f} ms",
            f"{tpot:,.1f} ms",
            f"{p.out_tok_s_per_gpu:,.0f}",
            f"{p.out_tok_s_per_user:,.1f}",
            head,
            p.bottleneck,
            f"{cost_per_mtok(q, p):,.2f}",
            sim,
        )
    con.print(t)
    for mode, front in a.fronts.items():
        ft = Table(title=f"Pareto front, {mode}: tok/s/GPU vs tok/s/user (TTFT within SLO)")
        for col in ("tok/s/user", "tok/s/GPU", "deployment"):
            ft.add_column(col, justify="left" if col == "deployment" else "right")
        for u, g, lab in front:
            ft.add_row(f"{u:,.1f}", f"{g:,.0f}", lab)
        con.print(ft)
    if a.recommendations:
        best = a.recommendations[0]
        for engine, cmd in launch_commands(q, best.cand, best.point).items():
            con.print(f"[bold]{engine}[/bold] launch for #1:")
            con.print(cmd, markup=False, highlight=False)


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
    tpot = a.question.slo.tpot_p90_ms
    if tpot:
        fig.add_vline(x=1000 / tpot, line_dash="dash", annotation_text=f"TPOT SLO {tpot:g} ms")
    fig.update_layout(xaxis_title="output tok/s per user", yaxis_title="output tok/s per GPU")
    return fig


def write_chart(a: Answer, path: Path) -> None:
    """The Pareto figure as a standalone plotly HTML page, written atomically."""
    fig = pareto_figure(a)
    fig.update_layout(title=f"{a.question.model} on {a.question.hardware}: throughput vs interactivity")
    tmp = path.with_name(path.name + ".part")
    fig.write_html(str(tmp), include_plotlyjs=True)
    tmp.replace(path)
