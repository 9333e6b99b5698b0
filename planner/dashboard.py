"""What the Streamlit dashboard (app.py) shows, computed from the same API as the CLI.

The page only lays things out; every number comes from here: the planner's answer, a
deployment's step breakdowns against the hardware limit, memory per rank, a simulation's time
series, what-if variants of a deployment, and the validation table. Inputs a user can get wrong
raise `PlannerError` with a message the page shows as is.
"""

from __future__ import annotations

import copy
import hashlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go
import yaml

from planner.defaults import resolve, to_scenario
from planner.estimator import estimate
from planner.explain import speed_of_light
from planner.metrics import Metrics
from planner.plan import Answer
from planner.plan_report import SLO_NAMES, answer_dict, csv_text, table_rows
from planner.plan_report import pareto_figure as report_pareto_figure
from planner.scenario import parse_scenario
from planner.simulate import run_simulation
from planner.verify import as_resolved
from roofline.errors import PlannerError
from roofline.kernels import TENSOR_CORE_ALTERNATIVE, select
from roofline.step import CATEGORIES, StepCost
from simulator import SimConfig, TraceSpec

CATEGORY_COLORS = dict(
    zip(CATEGORIES, ("#4c78a8", "#9ecae9", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#b279a2"), strict=True)
)


def code_fingerprint() -> str:
    """Hash of every source and data file the answers depend on (cache key for persisted answers)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for pkg in ("roofline", "simulator", "planner"):
        for f in sorted((root / pkg).rglob("*")):
            if f.suffix in (".py", ".yaml", ".json"):
                h.update(f.read_bytes())
    return h.hexdigest()[:16]


def recommendations_table(a: Answer) -> list[dict[str, Any]]:
    """The recommendation records as rows: the same rows the CLI's table and CSV show."""
    return table_rows(a)


def scenario_of(a: Answer, index: int) -> dict[str, Any]:
    """Recommendation `index` with the question's traffic, as a scenario mapping."""
    return to_scenario(as_resolved(a.question, a.recommendations[index].point))


def closest_message(a: Answer) -> str | None:
    if a.feasible or not a.recommendations:
        return None
    r = a.recommendations[0]
    binding = SLO_NAMES.get(r.binding, r.binding)
    return (
        f"No deployment meets the SLO. Closest configuration: {r.deployment.describe()} "
        f"({r.cand.precision_label}); the binding constraint is {binding}."
    )


def pareto_figure(a: Answer) -> go.Figure:
    fig = report_pareto_figure(a)
    fig.update_layout(height=420, margin={"t": 30, "b": 40}, legend={"orientation": "h"})
    return fig


@dataclass(frozen=True, slots=True)
class WhatIf:
    """One change set applied to a deployment; None leaves a field as it was."""

    kv_cache: str | None = None  # bf16 | fp8 (fp8 also switches attention math to fp8)
    moe: str | None = None
    ep: int | None = None  # decode-pool EP scale (DP attention over the same ranks)
    batch: int | None = None  # sequences in flight per decode instance
    mtp_accepted: float | None = None  # with 3 drafts
    comm_overlap: float | None = None
    mem_fraction: float | None = None
    tensor_core_kernels: bool = False  # swap CUDA-core fallbacks (sm_120) for tensor-core kernels


def apply_what_if(scn: dict[str, Any], w: WhatIf) -> dict[str, Any]:
    s = copy.deepcopy(scn)
    prec, rt = s.setdefault("precision", {}), s.setdefault("runtime", {})
    if w.kv_cache:
        prec["kv_cache"] = w.kv_cache
        prec["attention"] = "fp8" if w.kv_cache == "fp8" else "bf16"
    if w.moe:
        prec["moe"] = w.moe
    dep = s["deployment"]
    pool = "decode" if "decode" in dep else "aggregated"
    if w.ep:
        dep[pool] = {**dep[pool], "gpus_per_instance": w.ep, "tp": 1, "dp_attention": w.ep, "ep": w.ep, "pp": 1}
    if w.batch:
        s["workload"] = {k: v for k, v in s["workload"].items() if k != "request_rate"}
        s["workload"]["concurrency"] = w.batch * dep[pool].get("instances", 1)
    if w.mtp_accepted is not None:
        s["mtp"] = {"draft_tokens": 3, "accepted_tokens": w.mtp_accepted}
    if w.comm_overlap is not None:
        rt["comm_overlap"] = w.comm_overlap
    if w.mem_fraction is not None:
        rt["mem_fraction"] = w.mem_fraction
    if w.tensor_core_kernels:
        rt["kernel_overrides"] = tensor_core_overrides(s)
    return s


def tensor_core_overrides(scn: dict[str, Any]) -> dict[str, str]:
    res = resolve(parse_scenario(scn))
    hw, moe = res.hardware, res.deployment.pools[0].instance.precision.moe
    out = {}
    for family, fmt in (("sparse_attn", "*"), ("indexer", "*"), ("moe_gemv", moe)):
        name = select(hw.arch, family, fmt).name
        if name in TENSOR_CORE_ALTERNATIVE:
            out[family] = TENSOR_CORE_ALTERNATIVE[name]
    return out


@dataclass(slots=True)
class Breakdown:
    estimate: Metrics
    decode_ms: dict[str, float]
    prefill_ms: dict[str, float]
    decode_limit_ms: float
    prefill_limit_ms: float
    memory_gb: dict[str, dict[str, float]]
    metrics: dict[str, float]


def _cats(step: StepCost | None) -> dict[str, float]:
    return {k: v * 1e3 for k, v in step.by_category().items()} if step else dict.fromkeys(CATEGORIES, 0.0)


def breakdown(scn: dict[str, Any]) -> Breakdown:
    """Estimate a deployment and split its steps by category (milliseconds)."""
    res = resolve(parse_scenario(scn))
    e = estimate(res)
    dec_pool = res.deployment.first("decode") or res.deployment.first("aggregated")
    pre_pool = res.deployment.first("prefill") or res.deployment.first("aggregated")
    dl = speed_of_light(e.decode_step, dec_pool.instance) * 1e3 if e.decode_step and dec_pool else 0.0
    pl = speed_of_light(e.prefill_step, pre_pool.instance) * 1e3 if e.prefill_step and pre_pool else 0.0
    metrics = {
        "TTFT ms (estimate, mean)": e.ttft_s * 1e3,
        "TPOT ms (estimate, mean)": e.tpot_s * 1e3,
        "tok/s/GPU": e.output_tok_s_per_gpu,
        "tok/s/user": e.output_tok_s_per_user,
        "GPUs": float(e.gpus),
    }
    return Breakdown(
        e,
        _cats(e.decode_step),
        _cats(e.prefill_step),
        dl,
        pl,
        {k: p.breakdown_gb() for k, p in e.memory.items()},
        metrics,
    )


def breakdown_figure(items: list[tuple[str, Breakdown]]) -> go.Figure:
    """Stacked decode and prefill step times per deployment, with each step's hardware limit."""
    fig = go.Figure()
    xs = [f"{label}: {step}" for label, _ in items for step in ("decode", "prefill")]
    for cat in CATEGORIES:
        ys = [v for _, b in items for v in (b.decode_ms[cat], b.prefill_ms[cat])]
        fig.add_trace(go.Bar(name=cat, x=xs, y=ys, marker_color=CATEGORY_COLORS[cat]))
    limits = [v for _, b in items for v in (b.decode_limit_ms, b.prefill_limit_ms)]
    fig.add_trace(
        go.Scatter(
            name="hardware limit",
            x=xs,
            y=limits,
            mode="markers",
            marker={"symbol": "line-ew-open", "size": 40, "color": "black"},
        )
    )
    fig.update_layout(barmode="stack", yaxis_title="ms per step", height=380, margin={"t": 20})
    return fig


def memory_figure(b: Breakdown) -> go.Figure:
    fig = go.Figure()
    pools = list(b.memory_gb)
    for part in ("weights", "kv_pool", "activations_and_graphs", "comm_buffers"):
        fig.add_trace(go.Bar(name=part, x=pools, y=[b.memory_gb[p][part] for p in pools]))
    fig.update_layout(barmode="stack", yaxis_title="GB per GPU", height=320, margin={"t": 20})
    return fig


def timeseries(
    scn: dict[str, Any], requests: int = 1200, seed: int = 0, trace: TraceSpec | None = None
) -> dict[str, list[float]]:
    """Per-second queue length, batch, KV use and latencies from a simulation of the deployment."""
    res = resolve(parse_scenario(scn))
    cfg = SimConfig(requests=requests, seed=seed, trace=trace)
    result, _ = run_simulation(res, cfg)
    steps, t = result.steps, result.table
    if not len(steps):
        return {"time_s": []}
    end = float(np.nanmax(t.finish))
    bins = np.arange(0.0, end + 1.0, max(end / 120, 0.05))
    idx = np.digitize(steps[:, 0], bins)

    def per_bin(col: int, agg: str) -> list[float]:
        out = []
        for k in range(1, len(bins)):
            v = steps[idx == k, col]
            out.append(float(v.max() if agg == "max" else v.mean()) if len(v) else 0.0)
        return out

    fin = np.digitize(t.finish, bins)
    ttft = [
        float(np.nanmean((t.first_token - t.arrival)[fin == k])) * 1e3 if (fin == k).any() else float("nan")
        for k in range(1, len(bins))
    ]
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot_all = (t.finish - t.first_token) / np.maximum(t.osl - 1, 1)
    tpot = [
        float(np.nanmean(tpot_all[fin == k])) * 1e3 if (fin == k).any() else float("nan") for k in range(1, len(bins))
    ]
    return {
        "time_s": bins[1:].tolist(),
        "queue": per_bin(6, "max"),
        "batch": per_bin(2, "max"),
        "kv_fraction": per_bin(5, "max"),
        "ttft_ms": ttft,
        "tpot_ms": tpot,
    }


def timeseries_figure(ts: dict[str, list[float]]) -> go.Figure:
    from plotly.subplots import make_subplots  # noqa: PLC0415  (plotly submodule, loaded on use)

    fig = make_subplots(
        rows=2, cols=2, shared_xaxes=True, subplot_titles=("queue length", "batch size", "KV use", "TTFT / TPOT (ms)")
    )
    x = ts["time_s"]
    fig.add_trace(go.Scatter(x=x, y=ts["queue"], name="queue"), row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=ts["batch"], name="batch"), row=1, col=2)
    fig.add_trace(go.Scatter(x=x, y=ts["kv_fraction"], name="KV fraction"), row=2, col=1)
    fig.add_trace(go.Scatter(x=x, y=ts["ttft_ms"], name="TTFT ms"), row=2, col=2)
    fig.add_trace(go.Scatter(x=x, y=ts["tpot_ms"], name="TPOT ms"), row=2, col=2)
    fig.update_layout(height=460, showlegend=False, margin={"t": 40})
    return fig


def trace_from_upload(data: bytes, filename: str, time_scale: float = 1.0) -> TraceSpec:
    """Save an uploaded trace and name its format from its header."""
    head = data[:200].decode("utf-8", errors="replace")
    if head.lstrip().startswith("{"):
        fmt = "mooncake"
    elif "arrived_at" in head:
        fmt = "splitwise"
    elif "TIMESTAMP" in head:
        fmt = "azure"
    else:
        raise PlannerError(f"{filename}: not an Azure CSV, Splitwise CSV or Mooncake JSONL trace")
    path = Path(tempfile.mkdtemp(prefix="planner-trace-")) / Path(filename).name
    path.write_bytes(data)
    return TraceSpec.model_validate({"path": str(path), "format": fmt, "time_scale": time_scale})


def downloads(a: Answer, index: int) -> dict[str, str]:
    launch = answer_dict(a, launch_top=index + 1)["recommendations"][index].get("launch", {})
    return {
        "scenario.yaml": yaml.safe_dump(scenario_of(a, index), sort_keys=False),
        "launch.txt": "\n\n".join(f"# {k}\n{v}" for k, v in launch.items()),
        "results.json": json.dumps(answer_dict(a), indent=2, default=str),
        "results.csv": csv_text(a),
    }


def validation(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any], go.Figure]:
    """Anchors with predicted, published and error, and a predicted-vs-published plot."""
    from planner.validate import validate_file  # noqa: PLC0415  (validation pulls in the simulator)

    results, summary = validate_file(path)
    rows = [
        {
            "anchor": r.id,
            "metric": r.metric,
            "published": r.published,
            "predicted": r.predicted,
            "error": None if r.rel_error is None else round(r.rel_error, 4),
            "within tolerance": r.within_tolerance,
            "method": r.method,
            "problem": r.error or "",
        }
        for r in results
    ]
    ok = [r for r in results if r.predicted is not None and r.published]
    fig = go.Figure(
        go.Scatter(
            x=[r.published for r in ok],
            y=[r.predicted for r in ok],
            mode="markers",
            text=[r.id for r in ok],
            marker={"color": ["#54a24b" if r.within_tolerance else "#e45756" for r in ok], "size": 10},
            hovertemplate="%{text}<br>published %{x:,.4g}<br>predicted %{y:,.4g}<extra></extra>",
        )
    )
    lo = min([min(r.published, r.predicted) for r in ok] or [0.1])  # type: ignore[type-var]
    hi = max([max(r.published, r.predicted) for r in ok] or [1.0])  # type: ignore[type-var]
    fig.add_trace(
        go.Scatter(
            x=[lo, hi], y=[lo, hi], mode="lines", line={"dash": "dash", "color": "grey"}, name="predicted = published"
        )
    )
    fig.update_layout(
        xaxis_type="log",
        yaxis_type="log",
        xaxis_title="published",
        yaxis_title="predicted",
        height=450,
        showlegend=False,
    )
    return rows, summary, fig
