"""Render a planning answer: ranked recommendations, Pareto fronts, launch commands and JSON (the HTML chart:
`planner.report.plan_chart`). Presentation only."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

from planner.inputs.question import SLO_STATISTICS, Question, target_parts
from planner.launch import launch_commands, requirements
from planner.model.deployment import layout_label, precision_label
from planner.model.metrics import Metrics
from planner.model.write_scenario import to_scenario
from planner.report.plan_notes import first_loadable, load_note, notes
from planner.report.table_fit import fitted
from planner.report.verdicts import verdict_word
from planner.search.compare import user_figure
from planner.search.plan import Answer, Recommendation, cost_per_mtok
from planner.search.verify import as_resolved, missed_most

SLO_NAMES = {f"{n}_{s}_ms": n.upper() for n in ("ttft", "tpot", "e2e") for s in SLO_STATISTICS}


def _ms(m: Metrics, name: str, stat: str) -> float | None:
    """A latency as shown: the question's percentile (`stat`) when simulated, the mean when estimated."""
    return m.latency_ms(name, stat if m.method == "simulate" else "mean")


def slo_text(q: Question) -> str:
    """The question's targets in words: 'TTFT p90 <= 2000 ms, TPOT p90 <= 50 ms' ('none' without)."""
    return ", ".join(f"{SLO_NAMES[k]} {target_parts(k)[1]} <= {v:g} ms" for k, v in q.slo.targets().items()) or "none"


def record(a: Answer, r: Recommendation, rank: int) -> dict[str, Any]:
    """The one record of a recommendation; the rich table, JSON, CSV and the dashboard render
    it and never recompute. `figures` says where the shown numbers come from."""
    q, p, m, dep = a.question, r.point, r.metrics, r.deployment
    est, stat = p.metrics, a.question.slo.statistic
    prefill = dep.first("prefill")
    main = dep.first("decode") or dep.first("aggregated")
    assert main is not None
    prec = main.instance.precision
    meets = r.meets if r.simulated is not None else p.meets
    return {
        "rank": rank,
        "deployment": dep.describe(p.offloaded),
        "label": p.label,  # layout (host offload marked), precision, MTP, batch, memory fraction
        "mode": dep.mode,
        "gpus": dep.gpus,
        "decode_layout": layout_label(main.parallel),
        "prefill_layout": layout_label(prefill.parallel) if prefill else None,
        "decode_instances": main.instances,
        "prefill_instances": prefill.instances if prefill else 0,
        "precision": prec.model_dump(),
        "precision_label": precision_label(prec, dep.model.moe is not None),
        "mtp": main.instance.mtp is not None,
        "kv_mem_fraction": main.instance.runtime.mem_fraction,
        "batch_per_instance": p.batch,
        "figures": _figures(m, stat),
        "ttft_ms": _ms(m, "ttft", stat),
        "tpot_ms": _ms(m, "tpot", stat),
        "e2e_ms": _ms(m, "e2e", stat),
        "output_tok_s_per_gpu": m.output_tok_s_per_gpu,
        # 1000 / mean TPOT, the one tokens-per-user of every view (simulate, estimate, compare, the Pareto chart)
        "output_tok_s_per_user": m.output_tok_s_per_user or None,
        "output_tok_s": m.output_tok_s,
        "meets_slo": meets,
        "slo_verdict": _verdict(meets, m),
        "slo_verdict_by": m.method,
        "headroom": {SLO_NAMES[k]: round(v - 1, 4) for k, v in r.slack.items()},
        "bottleneck": p.bottleneck,
        "usd_per_million_output_tokens": cost_per_mtok(q, r),
        # the target a row misses most, on every row that misses one (a second row 11% over its TTFT read null; a
        # row that fails only for not settling binds none; trial and review, nineteenth session)
        "binding_constraint": r.binding or missed_most(r.slack) or None,
        "needs": requirements(q, dep),  # what the launch needs beyond its commands
        # the scenario `planner simulate` / `estimate` take for this row (its traffic included)
        "scenario": scenario_of(q, r),
        "estimate": {
            "ttft_ms": est.ttft_s * 1e3,
            "tpot_ms": est.latency_ms("tpot", "mean"),
            "e2e_ms": est.e2e_s * 1e3,
            "output_tok_s_per_gpu": est.output_tok_s_per_gpu,
            "decode_batch_mean": est.decode_batch,
        },
        "simulated": None
        if r.simulated is None
        else {
            f"ttft_{stat}_ms": _ms(r.simulated, "ttft", stat),
            f"tpot_{stat}_ms": _ms(r.simulated, "tpot", stat),
            f"e2e_{stat}_ms": _ms(r.simulated, "e2e", stat),
            "ttft_mean_ms": r.simulated.ttft_s * 1e3,
            "tpot_mean_ms": r.simulated.latency_ms("tpot", "mean"),
            "output_tok_s_per_gpu": r.simulated.output_tok_s_per_gpu,
            "requests_completed": (r.simulated.summary or {}).get("requests_completed"),  # simulate's name for it
            "requests_measured": (r.simulated.summary or {}).get("requests_measured"),  # its percentiles' count
            "converged": (r.simulated.summary or {}).get("converged"),
            "overloaded": (r.simulated.summary or {}).get("overloaded"),
        },
    }


def records(a: Answer) -> list[dict[str, Any]]:
    """Every recommendation's record, ranked from 1."""
    return [record(a, r, i) for i, r in enumerate(a.recommendations, 1)]


def scenario_of(q: Question, r: Recommendation) -> dict[str, Any]:
    """A recommendation's deployment with the question's traffic, as a scenario mapping: the very
    deployment and rate its row was simulated at (`planner.search.verify.as_resolved`)."""
    return to_scenario(as_resolved(q, r.point))


def write_scenarios(a: Answer, folder: Path) -> list[Path]:
    """Each recommendation's scenario as `rec<rank>_scenario.yaml` in `folder` (each written atomically)."""
    paths = []
    for i, r in enumerate(a.recommendations, 1):
        path = folder / f"rec{i}_scenario.yaml"
        tmp = path.with_name(path.name + ".part")
        tmp.write_text(yaml.safe_dump(scenario_of(a.question, r), sort_keys=False))
        tmp.replace(path)
        paths.append(path)
    return paths


def _headroom(name: str, v: float) -> str:
    """target / achieved - 1 as a percentage; from 10x the target up as a multiple ('TTFT+168921%' read
    as noise in the sixteenth trial: 'TTFT 1,690x')."""
    return f"{name}{v:+.0%}" if v < 9 else f"{name} {v + 1:,.0f}x"


def _verdict(meets: bool | None, m: Metrics) -> str:
    """A row's verdict word (`verdicts.verdict_word`, which `planner simulate` says too)."""
    return verdict_word(meets, m.summary if m.method == "simulate" else None)


def _figures(m: Metrics, stat: str = "p90") -> str:
    """Where a row's figures come from ('simulated p90', or the question's percentile `stat`; 'estimate
    (mean)'), and whether its simulation was over capacity (its queue grows: never meets) or unsteady
    (its measured halves disagree): the summary's `steady`, the verdict the SLO check reads (a trace's halves
    may differ by design; its row said 'not steady' beside 'meets (simulate)')."""
    if m.method != "simulate":
        return "estimate (mean)"
    summary = m.summary or {}
    if summary.get("overloaded"):
        return f"simulated {stat}, over capacity"
    return f"simulated {stat}, not steady" if summary.get("steady") is False else f"simulated {stat}"


def _question_dict(q: Question) -> dict[str, Any]:
    """The question as JSON, its SLO's percentile stated (`slo.statistic`, as a row's scenario states it)."""
    d = q.model_dump(exclude={"simulation"})
    d["slo"]["statistic"] = q.slo.statistic
    return d


def answer_dict(a: Answer, launch_top: int = 3) -> dict[str, Any]:
    recs = records(a)
    # the first `launch_top` records and the first whose weights exist (the one the text prints commands for) get
    # their launch; every record has both keys (null elsewhere)
    loads = first_loadable(recs)
    for i, (r, d) in enumerate(zip(a.recommendations, recs, strict=True)):
        given = i < launch_top or i == loads
        d["launch"] = launch_commands(a.question, r) if given else None
        d["load_note"] = load_note(a.question, r, d["rank"]) if given else None
    return {
        "question": _question_dict(a.question),
        "feasible": a.feasible,
        "notes": notes(a, recs),
        "candidates": {"scored": a.scored, "pruned": dict(a.pruned), "simulated": a.simulated},
        "recommendations": recs,
        "pareto": {
            mode: [
                {
                    "output_tok_s_per_user": u or None,  # answers of one token have none
                    "output_tok_s_per_gpu": g,
                    "deployment": lab,
                    "figures": "estimate",
                }
                for u, g, lab in front
            ]
            for mode, front in a.fronts.items()
        },
    }


def table_rows(a: Answer, recs: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The recommendations as display rows (the rich table, the CSV and the dashboard). `recs`: the
    answer's records, where the caller has them."""
    rows = []
    for i, d in enumerate(records(a) if recs is None else recs, 1):
        verdict = d["slo_verdict"]
        head = " ".join(_headroom(k, v) for k, v in d["headroom"].items())
        if d["binding_constraint"]:
            head += f" (binds: {SLO_NAMES.get(d['binding_constraint'], d['binding_constraint'])})"
        rows.append(
            {
                "#": i,
                "deployment": d["deployment"],
                "GPUs": d["gpus"],
                "precision": d["precision_label"],
                "MTP": "yes" if d["mtp"] else "no",
                "batch": d["batch_per_instance"],
                "figures": d["figures"],
                "TTFT ms": round(d["ttft_ms"], 1) if d["ttft_ms"] is not None else None,
                "TPOT ms": round(d["tpot_ms"], 2) if d["tpot_ms"] is not None else None,
                "tok/s/GPU": round(d["output_tok_s_per_gpu"], 1),
                "tok/s/user": round(d["output_tok_s_per_user"], 1) if d["output_tok_s_per_user"] else None,
                "SLO": f"{verdict} ({d['slo_verdict_by']})",
                "headroom": head,
                "bottleneck": d["bottleneck"],
                "$/Mtok": round(d["usd_per_million_output_tokens"], 3),
                "needs": "; ".join(d["needs"]) or None,
            }
        )
    return rows


def csv_text(a: Answer) -> str:
    rows = table_rows(a)
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return buf.getvalue()


def print_answer(con: Console, a: Answer, top: int = 8) -> None:
    q = a.question
    con.print(
        f"{q.model} on {q.hardware} with {q.engine}, budget {q.budget} GPUs, {q.isl}/{q.osl} tokens, "
        f"SLO {slo_text(q)}, "
        f"optimize {q.optimize}",
        markup=False,
    )
    if q.price_per_gpu_hour == type(q).model_fields["price_per_gpu_hour"].default:
        con.print(f"$/Mtok at ${q.price_per_gpu_hour:g} per GPU-hour, the default (--price-per-gpu-hour sets it)")
    why = ", ".join(f"{n} {why}" for why, n in a.pruned.most_common())
    pruned = f"{sum(a.pruned.values())} pruned before scoring ({why})" if why else "none pruned"
    # simulations, not candidates: a candidate's lower batches and bisections run too (4 scored read '6 simulated')
    runs = f"{a.simulated} simulation{'s' if a.simulated != 1 else ''} run"
    con.print(f"{a.scored} candidates scored; {pruned}; {runs}", markup=False)
    recs = records(a)
    for note in notes(a, recs):
        con.print(Text(note, style="yellow"))
    title = "recommendations" if a.feasible else "closest configuration first"
    how = (
        f"figures: simulated {q.slo.statistic} where simulated ('not steady': the run's two halves disagree or it "
        "fills and drains throughout, unverified unless both halves miss; "
        "'over capacity': its queue grows, never meets), else estimate means; tok/s/user = 1000 / mean TPOT; "
        "precision: attention/KV/dense/experts; batch: the estimate's decode batch per instance (a simulated run's "
        "own varies with its traffic)"
    )
    every = table_rows(a, recs)
    loads = first_loadable(recs)
    shown = list(range(min(top, len(every))))
    if loads is not None and loads >= top:  # the first row whose weights exist, shown too (trial: #11, hidden)
        shown.append(loads)
    rows = [every[k] for k in shown]
    t, left_out = fitted(con, f"{title} ({how})", rows)
    con.print(t)
    if len(every) > len(rows):
        also = f", and #{loads + 1}, the first whose weights exist" if loads is not None and loads >= top else ""
        con.print(
            Text(
                f"{len(rows)} of {len(every)} rows shown (the first {min(top, len(every))}{also}); --json and "
                f"--scenarios hold all {len(every)}",
                style="dim",
            )
        )
    if left_out:
        con.print(
            Text(
                f"left out at this terminal's width ({con.width} columns): {', '.join(left_out)}; a wider terminal "
                "(or COLUMNS=320), --json or --scenarios shows every column",
                style="dim",
            )
        )
    within = " (TTFT within the SLO)" if q.slo.target("ttft") else ""  # the fronts keep points within TTFT targets
    for mode, front in a.fronts.items():
        if not front:  # e.g. disaggregation on one GPU: say so instead of an empty table
            traffic = a.question.traffic_text
            why = (  # under stated traffic the points are that traffic's: none where no deployment serves it
                f"no {mode} deployment was scored within the question's GPUs: see the pruning reasons above"
                if not a.scored_modes.get(mode)
                else f"no {mode} deployment within the question's GPUs serves {traffic}{within}"
                if traffic and not a.recommendations
                else f"no {mode} deployment within the question's GPUs has a point{within}"
            )
            con.print(Text(f"Pareto front, {mode}: none ({why})", style="yellow"))
            continue
        ft = Table(title=f"Pareto front, {mode} (estimates): tok/s/GPU vs tok/s/user{within}")
        for col in ("tok/s/user", "tok/s/GPU", "deployment"):
            ft.add_column(col, justify="left" if col == "deployment" else "right")
        for u, g, lab in front:  # answers of one token have no tok/s/user: '-'
            ft.add_row(user_figure(u) if u else "-", f"{g:,.0f}", lab)
        con.print(ft)
    if a.recommendations:
        # the first row a published checkpoint loads (#1's commands stopped on ${CHECKPOINT:?}; trial)
        i = loads or 0  # a row the table shows (review: all 20 were searched)
        best = a.recommendations[i]
        if i:
            con.print(
                Text(
                    f"launch commands for #{i + 1}, the first row a published checkpoint loads (#1's, which ask "
                    "for a checkpoint of its weights, are in --json)",
                    style="bold",
                )
            )
        for engine, cmd in launch_commands(q, best).items():
            con.print(Text(f"{engine} launch for #{i + 1}:", style="bold"))
            con.print(cmd, markup=False, highlight=False)
        con.print(Text(load_note(q, best, i + 1), style="dim"))
