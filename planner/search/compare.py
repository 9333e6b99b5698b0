"""`planner compare`: which GPU? For one model and workload, the throughput-per-GPU vs
tokens/s-per-user frontier of every catalog system that can hold the model (the InferenceMAX
view). Each point is a deployment the planner's own search found (`planner.search.plan.plan` with no
SLO and no simulation: estimates), on the shape engines commonly run on that system (one node,
or the NVL72 domain), widened to more nodes until the model fits. Cost per million output
tokens is the GPU-hour price over the throughput per GPU, where a price is given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go
from rich.console import Console
from rich.table import Table

from planner.engines import profile
from planner.inputs.question import Question
from planner.model.estimator import estimate
from planner.model.metrics import Metrics
from planner.model.write_scenario import to_scenario
from planner.search.plan import pareto, plan
from planner.search.unknowns import default_gpus
from planner.search.verify import as_resolved
from roofline.calibrated import MEASURED
from roofline.catalog import get_hardware, hardware_ids
from roofline.errors import PlannerError

PRIORS = "kernel priors"
PRIORS_NOTE = (
    "kernel priors: no kernel of that architecture is measured (the project's GPU is an H200): its kernel times are "
    "priors from published kernel figures (roofline/kernel_paths.py), and their per-launch floors set its small-batch, "
    "high tok/s/user points, the least certain ones"
)
MAX_GPUS = 144  # widest budget tried for a model that does not fit on the default shape


@dataclass(slots=True)
class Frontier:
    hardware: str
    gpus: int  # the budget searched
    points: list[tuple[float, float, str]] = field(default_factory=list)  # (tok/s/user, tok/s/GPU, deployment)
    reason: str = ""  # why there is no frontier (the model does not fit)
    scenarios: dict[str, dict[str, Any]] = field(default_factory=dict)  # each point's scenario, by its label
    engine: str = "sglang"

    @property
    def kernels(self) -> str:
        """Where its kernel times come from: measured tables (Hopper, the project's H200) or the kernel-path
        priors, whose per-launch floors set the small-batch points (sixteenth trial: Hopper read faster per
        user than every Blackwell system at batch 1 for Qwen3-30B-A3B, unsaid)."""
        arch = get_hardware(self.hardware).arch
        return f"kernels measured on {MEASURED[arch]}" if arch in MEASURED else PRIORS

    @property
    def runtime(self) -> str:
        """What the engine's profile runs differently on this architecture and bounds its points, said where
        the frontier is shown: eager launches where the profile has no CUDA graphs (Qwen3-30B-A3B on RTX PRO
        6000 topped out at 62 tok/s/user, 48% of its batch-1 step in launches, the reason only under an
        estimate's 'assumed'; trial, nineteenth session). '' where nothing differs."""
        prof = profile(self.engine).for_arch(get_hardware(self.hardware).arch)
        if prof.cuda_graphs.value:
            return ""
        return f"{self.engine} without CUDA graphs here, eager launches ({prof.cuda_graphs.source})"


def frontier(model: str, hw: str, isl: int, osl: int, engine: str) -> Frontier:
    budget = default_gpus(get_hardware(hw))
    while True:
        q = Question.model_validate(
            {
                "model": model,
                "hardware": hw,
                "max_gpus": budget,
                "isl": isl,
                "osl": osl,
                "engine": engine,
                "slo": {},
                "verify_top": 0,
            }
        )
        a = plan(q, workers=1)
        pts = [p for front in a.fronts.values() for p in front]
        if pts:
            # each point as `planner estimate` reads its exported scenario, labelled at that estimate's batch: the rate
            # it carries settles at the first batch that carries it, which a sweep point at a later crossing is not
            # (trial, twenty-first session: gpt-oss-120b on B200 at batch 3,671 read 34.9 tok/s/user where its
            # scenario reads 41.3 at 3,100); every point of the plan's fronts is re-read before the front is taken
            read, scenarios = [], {}
            for _, _, lab in pts:
                p = a.front_points[lab]
                res = as_resolved(q, p)
                est = estimate(res)
                label = res.deployment.label(round(est.decode_batch), p.offloaded)
                read.append((*_figures(est), label))
                scenarios[label] = to_scenario(res)
            front = pareto(read)
            return Frontier(hw, budget, front, scenarios={lab: scenarios[lab] for _, _, lab in front}, engine=engine)
        if budget * 2 > MAX_GPUS:
            pruned = ", ".join(f"{n} {why}" for why, n in a.pruned.most_common(2)) or "no candidates"
            return Frontier(hw, budget, reason=f"does not fit in {budget} GPUs ({pruned})", engine=engine)
        budget *= 2


def _figures(m: Metrics) -> tuple[float, float]:
    """(tok/s per user, tok/s per GPU), as the sweep's points give them (`score.Point`)."""
    return m.output_tok_s_per_user, m.output_tok_s_per_gpu


def compare(
    model: str, isl: int, osl: int, engine: str = "sglang", hardware: list[str] | None = None
) -> list[Frontier]:
    return [frontier(model, hw, isl, osl, engine) for hw in hardware or hardware_ids()]


def cost_per_mtok(price_per_gpu_hour: float | None, tok_s_per_gpu: float) -> float | None:
    if price_per_gpu_hour is None or tok_s_per_gpu <= 0:
        return None
    return price_per_gpu_hour / 3600 / tok_s_per_gpu * 1e6


def compare_dict(fronts: list[Frontier], price: dict[str, float] | None = None) -> dict[str, Any]:
    price = price or {}
    return {
        "figures": "estimate",
        "hardware": [
            {
                "hardware": f.hardware,
                "gpus_searched": f.gpus,
                "kernels": f.kernels,
                "runtime": f.runtime or None,
                "reason": f.reason or None,
                "frontier": [
                    {
                        "output_tok_s_per_user": u or None,  # answers of one token have none
                        "output_tok_s_per_gpu": g,
                        "deployment": lab,
                        "usd_per_million_output_tokens": cost_per_mtok(price.get(f.hardware), g),
                        "scenario": f.scenarios.get(lab),
                    }
                    for u, g, lab in f.points
                ],
            }
            for f in fronts
        ],
    }


def compare_figure(fronts: list[Frontier], title: str = "") -> go.Figure:
    fig = go.Figure()
    for f in fronts:
        if not f.points:
            continue
        fig.add_trace(
            go.Scatter(
                x=[u for u, _, _ in f.points],
                y=[g for _, g, _ in f.points],
                mode="lines+markers",
                name=f"{f.hardware} (<= {f.gpus} GPUs)",
                text=[lab for _, _, lab in f.points],
                hovertemplate="%{text}<br>%{x:.1f} tok/s/user<br>%{y:,.0f} tok/s/GPU<extra></extra>",
            )
        )
    fig.update_layout(
        title=title or "throughput per GPU vs interactivity (estimates)",
        xaxis_title="output tok/s per user",
        yaxis_title="output tok/s per GPU",
        yaxis_type="log",
    )
    return fig


def parse_prices(text: str | None) -> dict[str, float]:
    """`h200-sxm=3.5,b200=5` -> {hardware: USD per GPU-hour}."""
    prices: dict[str, float] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, _, val = item.partition("=")
        if key.strip() in prices:
            raise PlannerError(f"--price: {key.strip()!r} is given twice; give each hardware one price")
        try:
            prices[key.strip()] = float(val)
        except ValueError:
            raise PlannerError(f"--price: {item.strip()!r} is not hardware=USD per GPU-hour") from None
        if not 0 < prices[key.strip()] < 1e6:
            raise PlannerError(f"--price: {item.strip()!r}: the price must be positive")
        if key.strip() not in hardware_ids():
            allowed = ", ".join(hardware_ids())
            raise PlannerError(f"--price: {key.strip()!r} is not a catalog hardware id; allowed {allowed}")
    return prices


def _figure(v: float) -> str:
    """Whole numbers from 100 up, three significant digits below (short answers: 2-7 tok/s/GPU read as ties)."""
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def user_figure(v: float) -> str:
    """tok/s/user to a tenth from 10 up, three significant digits below (0.021 read '0.0', sixteenth trial)."""
    return f"{v:,.1f}" if v >= 10 else f"{v:.3g}"


def print_compare(con: Console, data: dict[str, Any]) -> None:
    for f in data["hardware"]:
        if f["reason"]:
            con.print(f"{f['hardware']}: {f['reason']}", markup=False)
            continue
        t = Table(title=f"{f['hardware']}: frontier (estimates, up to {f['gpus_searched']} GPUs; {f['kernels']})")
        for col in ("tok/s/user", "tok/s/GPU", "$/Mtok", "deployment"):
            t.add_column(col, justify="left" if col == "deployment" else "right")
        for p in f["frontier"]:
            cost = p["usd_per_million_output_tokens"]
            t.add_row(
                "-" if not p["output_tok_s_per_user"] else user_figure(p["output_tok_s_per_user"]),
                _figure(p["output_tok_s_per_gpu"]),
                "-" if cost is None else f"{cost:,.3f}",
                p["deployment"],
            )
        con.print(t)
        if f.get("runtime"):
            con.print(f"{f['hardware']}: {f['runtime']}", style="dim", markup=False)
    if any(f["kernels"] == PRIORS for f in data["hardware"] if not f["reason"]):
        con.print(PRIORS_NOTE, style="dim", markup=False)
