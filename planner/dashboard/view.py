"""What the plan page says in words and cards, taken from the one recommendation record.

Cards, badges, the question header, column tooltips and the reasons an answer is empty are all
read from `planner.report.plan_report.record` / `table_rows` and the `Answer`; nothing here recomputes
a figure the table shows. This module does not plan, simulate or draw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from planner.inputs.question import Question
from planner.model import context
from planner.report.plan_report import SLO_NAMES, record, slo_text, table_rows
from planner.search.plan import Answer
from roofline.catalog import get_model

COLUMN_HELP = {
    "#": "rank: simulated deployments that meet the SLO first, then estimates not yet simulated, "
    "then simulated misses; by tok/s/GPU within each group",
    "deployment": "pools: instances x layout (TP tensor, DP attention data, EP expert parallel)",
    "GPUs": "GPUs the deployment uses (at most the question's budget)",
    "precision": "attention / KV cache / dense layers / experts number formats",
    "batch": "decode sequences in flight per decode (or aggregated) instance at the estimate's operating point "
    "(a simulated run's own varies with its traffic)",
    "figures": "where the row's latency and throughput come from: simulated at the SLO's percentile (p90 or p99; "
    "not steady: the run's two halves disagree, so it neither verifies nor refutes the SLO; over capacity: its "
    "queue grows, so it meets no SLO) or the estimator's means",
    "TTFT ms": "time to first token: simulated at the SLO's percentile, or the estimate's mean",
    "TPOT ms": "time per output token after the first: simulated at the SLO's percentile, or the estimate's mean",
    "tok/s/GPU": "output tokens per second per GPU at this operating point",
    "tok/s/user": "output tokens per second one user sees (1000 / mean TPOT ms)",
    "SLO": "whether the figures meet every SLO target, and by which method",
    "headroom": "target / achieved - 1 per SLO target (10x and up: the multiple); negative misses; 'binds' names "
    "the tightest",
    "bottleneck": "the step-cost category that takes the most time in the decode step",
    "$/Mtok": "USD per million output tokens = price per GPU-hour / 3600 / (tok/s/GPU) x 1e6",
}


COLUMN_WIDTHS = {  # pixels: the whole table fits a 1600 px window beside the question panel
    "#": 28, "deployment": 270, "GPUs": 44, "precision": 112, "MTP": 38, "batch": 52, "figures": 105,
    "TTFT ms": 64, "TPOT ms": 64, "tok/s/GPU": 72, "SLO": 120, "headroom": 160, "bottleneck": 78, "$/Mtok": 56,
}  # fmt: skip
TABLE_COLUMNS = list(COLUMN_WIDTHS)  # tok/s/user (1000 / TPOT) is the Pareto chart's x axis and in the CSV


def header(q: Question) -> str:
    """The question in one sentence (the page title's subtitle)."""
    traffic = q.traffic_text or "each deployment at its best operating point"
    slo = slo_text(q) if q.slo.targets() else "no SLO"
    budget = f"exactly {q.gpus}" if q.gpus else f"at most {q.max_gpus}"
    return (
        f"{get_model(q.model).name} on {q.hardware} with {q.engine}: {budget} GPUs, {q.isl:,} input / {q.osl:,} "
        f"output tokens, {traffic}; SLO {slo}; best {q.optimize}."
    )


@dataclass(frozen=True, slots=True)
class Card:
    label: str
    value: str
    help: str
    delta: str | None = None
    delta_color: str = "normal"  # streamlit: normal (up is good) | inverse (down is good) | off


def plan_cards(a: Answer, index: int) -> tuple[list[Card], dict[str, Any]]:
    """Cards of recommendation `index`, read from its record; and the record."""
    d = record(a, a.recommendations[index], index + 1)
    how = d["figures"]

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:,.1f}"

    cards = [
        Card(f"TTFT ms ({how})", ms(d["ttft_ms"]), "time to first token, from the recommendation record"),
        Card(f"TPOT ms ({how})", ms(d["tpot_ms"]), "time per output token, from the recommendation record"),
        Card(f"tok/s/GPU ({how.split()[0]})", f"{d['output_tok_s_per_gpu']:,.1f}", COLUMN_HELP["tok/s/GPU"]),
        Card("GPUs", f"{d['gpus']:,}", f"of a budget of {a.question.budget}"),
        Card("$/Mtok", f"{d['usd_per_million_output_tokens']:,.3f}", COLUMN_HELP["$/Mtok"]),
    ]
    return cards, d


def slo_badges(q: Question, figures: dict[str, float | None], how: str) -> list[tuple[str, bool]]:
    """(text, passes) per SLO target for figures named ttft_ms/tpot_ms/e2e_ms."""
    out = []
    for key, target in q.slo.targets().items():
        name = key.split("_")[0]
        got = figures.get(f"{name}_ms")
        ok = got is not None and got <= target
        out.append((f"{SLO_NAMES[key]} {'meets' if ok else 'misses'} {target:g} ms ({how})", ok))
    return out


def badge_markdown(badges: list[tuple[str, bool]]) -> str:
    return " ".join(f":{'green' if ok else 'red'}-badge[{'pass' if ok else 'FAIL'}: {t}]" for t, ok in badges)


def context_problem(q: Question) -> str | None:
    """A question longer than the model's context window (`planner.model.context`); None when it fits."""
    return context.context_problem(q.model, q.isl, q.osl)


def empty_reason(a: Answer) -> str | None:
    """Why an answer has no recommendation, from its pruning counts and scoring."""
    if a.recommendations:
        return None
    q = a.question
    pruned = ", ".join(f"{n} {why}" for why, n in a.pruned.most_common())
    if not a.scored:
        return f"No candidate deployment for {q.model} on {q.hardware} within {q.budget} GPUs: {pruned or 'none'}."
    traffic = f"{q.rate:,g} requests/s" if q.rate else f"{q.concurrency:,} requests in flight" if q.concurrency else ""
    return (
        f"{a.scored} candidates were scored but none has an operating point that serves "
        f"{traffic or 'this traffic'} within {q.budget} GPUs ({pruned or 'none'} pruned before scoring)."
    )


def front_reason(a: Answer) -> str | None:
    """Why the Pareto chart is empty while candidates were scored."""
    if any(a.fronts.values()) or not a.scored:
        return None
    ttft = a.question.slo.target("ttft")
    return (
        f"Pareto front empty: none of the {a.scored} scored candidates has an operating point with mean TTFT "
        f"within the {ttft:g} ms target"
        if ttft
        else f"Pareto front empty ({a.scored} candidates scored)"
    )


def ranking_note(a: Answer) -> str:
    rows = table_rows(a)
    sims = sum(r["figures"].startswith("simulated") for r in rows)
    return (
        f"Ranked: simulated deployments that meet the SLO first, then estimates not yet simulated, then "
        f"simulated misses; by {a.question.optimize} within each group. {sims} of {len(rows)} rows are "
        f"simulated {a.question.slo.statistic}s, the rest estimator means (they can differ a lot: see 'figures')."
    )


def closest_message(a: Answer) -> str | None:
    if a.feasible or not a.recommendations:
        return None
    r = a.recommendations[0]
    binding = SLO_NAMES.get(r.binding, r.binding)
    return f"No deployment meets the SLO. Closest configuration: {r.point.label}; the binding constraint is {binding}."
