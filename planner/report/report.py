"""Render estimates, explanations and validation results as rich tables or JSON-ready dicts.

Pure presentation: every number shown is computed elsewhere.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from planner.model.explain import Explanation
from planner.model.metrics import Metrics
from planner.report.verdicts import slo_verdict
from planner.search.validate import AnchorResult
from roofline.step import CATEGORIES, StepCost


def estimate_dict(e: Metrics) -> dict[str, Any]:
    return {
        "method": e.method,
        "mode": e.mode,
        "gpus": e.gpus,
        "concurrency": round(e.concurrency, 2),
        "decode_batch_per_instance": round(e.decode_batch, 2),
        "ttft_ms": round(e.ttft_s * 1e3, 3) if e.models("ttft") else None,
        "tpot_ms": round(e.tpot_s * 1e3, 4) if e.models("tpot") else None,
        "e2e_ms": round(e.e2e_s * 1e3, 2) if e.models("e2e") else None,
        "input_tok_s": round(e.input_tok_s, 2),
        "output_tok_s": round(e.output_tok_s, 2),
        "input_tok_s_per_gpu": round(e.input_tok_s_per_gpu, 2),
        "output_tok_s_per_gpu": round(e.output_tok_s_per_gpu, 2),
        "total_tok_s_per_gpu": round(e.total_tok_s_per_gpu, 2),
        "output_tok_s_per_user": round(e.output_tok_s_per_user, 3) or None,  # none without a TPOT
        "saturated": e.saturated,
        "limit": e.limit,
        "decode_step": step_dict(e.decode_step),
        "prefill_step": step_dict(e.prefill_step),
        "memory_gb": {k: {n: round(v, 3) for n, v in p.breakdown_gb().items()} for k, p in e.memory.items()},
        "assumed": e.assumed,
    }


STAGE_SCOPE = "one micro-batch on one pipeline stage"


def ops_scope(s: StepCost | None) -> str:
    """What a step's ops and categories add up to: the whole step, or under pipeline parallelism one
    micro-batch on one stage (the step's time passes every stage, roofline.pipeline)."""
    if s is None:
        return "the whole step"
    ops_s = sum(o.time_s for o in s.ops)
    return STAGE_SCOPE if abs(ops_s - s.time_s) > 0.01 * s.time_s else "the whole step"


def step_dict(s: StepCost | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {
        "time_ms": round(s.time_s * 1e3, 4),
        "tokens": s.tokens,
        "ops_scope": ops_scope(s),
        "by_category_ms": {k: round(v * 1e3, 4) for k, v in s.by_category().items()},
        "ops": [
            {
                "name": o.name,
                "category": o.category,
                "time_ms": round(o.time_s * 1e3, 4),
                "kernel": o.kernel,
                "bound": o.bound,
                "source": o.source,
            }
            for o in s.ops
        ],
        "notes": list(s.notes),
    }


def print_estimate(con: Console, title: str, e: Metrics) -> None:
    t = Table(title=f"{title}: estimate (steady-state means)", show_header=False)
    t.add_column("metric")
    t.add_column("value", justify="right")
    floor = ">= " if e.saturated else ""  # an overloaded open loop's queue grows: its latencies have no mean
    rows = [
        ("mode", e.mode),
        ("GPUs", f"{e.gpus}"),
        ("concurrency", f"{e.concurrency:,.0f}" if e.concurrency >= 10 else f"{e.concurrency:.3g}"),  # 0.4 read '0'
        ("decode batch / instance", f"{e.decode_batch:,.1f}"),
        ("TTFT", f"{floor}{e.ttft_s * 1e3:,.1f} ms" if e.models("ttft") else f"- (not in a {e.mode} phase)"),
        ("TPOT", f"{e.tpot_s * 1e3:,.2f} ms" if e.models("tpot") else f"- ({_no_tpot(e)})"),
        ("E2E", f"{floor}{e.e2e_s * 1e3:,.0f} ms" if e.models("e2e") else f"- (not in a {e.mode} phase)"),
        ("input tok/s per GPU", _num(e.input_tok_s_per_gpu)),
        ("output tok/s per GPU", _num(e.output_tok_s_per_gpu)),  # 3.96 read '4' (trial)
        ("output tok/s per user", f"{e.output_tok_s_per_user:,.1f}" if e.output_tok_s_per_user else "-"),
    ]
    for k, v in rows:
        t.add_row(k, v)
    if e.limit:
        t.add_row("[yellow]binding limit[/yellow]", e.limit)
    if e.saturated:
        t.add_row("[red]saturated[/red]", "the offered load exceeds capacity")
        t.add_row("", "its queue grows: TTFT, E2E >= their figures at capacity")
    con.print(t)
    for step, kind in ((e.prefill_step, "prefill (its chunks' steps summed)"), (e.decode_step, "decode step")):
        if step is None:
            continue
        title = kind
        if kind == "decode step" and step.carries_prompt:
            # a mixed scheduler's (vLLM, TRT-LLM) step that carries a prompt's prefill beside the decodes
            title = "decode step with a prompt (mixed scheduler; TPOT averages it with plain decode steps)"
        print_step(con, f"{title}: {step.time_s * 1e3:,.2f} ms for {step.tokens:,} tokens", step)
    for role, plan in e.memory.items():
        mt = Table(title=f"memory per GPU ({role} pool), GB")
        for k in plan.breakdown_gb():
            mt.add_column(k, justify="right")
        mt.add_row(*(f"{v:,.1f}" for v in plan.breakdown_gb().values()))
        con.print(mt)
    if e.assumed:
        con.print("[dim]assumed:[/dim]")
        for a in e.assumed:
            con.print(f"[dim]  - {a}[/dim]")


def print_step(con: Console, title: str, s: StepCost) -> None:
    total = sum(o.time_s for o in s.ops) or 1.0
    t = Table(title=title)
    for col in ("op", "category", "ms", "share", "kernel", "bound", "source"):
        t.add_column(col, justify="right" if col in ("ms", "share") else "left", no_wrap=col in ("op", "kernel"))
    for o in sorted(s.ops, key=lambda o: -o.time_s):
        if o.time_s <= 0:
            continue
        t.add_row(o.name, o.category, f"{o.time_s * 1e3:,.3f}", f"{o.time_s / total:.1%}", o.kernel, o.bound, o.source)
    con.print(t)
    ops_s = sum(o.time_s for o in s.ops)
    if abs(ops_s - s.time_s) > 0.01 * s.time_s:  # pipeline parallel: the step spans its stages' micro-batches
        con.print(
            f"[dim]the ops above sum to {ops_s * 1e3:,.2f} ms: one micro-batch on one pipeline stage; the step's "
            f"{s.time_s * 1e3:,.2f} ms passes every stage (roofline.pipeline)[/dim]"
        )
    for n in s.notes:
        con.print(f"[dim]{n}[/dim]")


def print_explanation(con: Console, x: Explanation) -> None:
    print_estimate(con, "deployment", x.estimate)
    total = sum(x.categories.values()) or 1.0
    # pipeline parallel: the ops are one micro-batch on one stage; the step passes every stage (trial: a PP2
    # step read 887.78 ms in its header beside '444.03 ms, 26.0x the limit' here, unsaid)
    scope = ops_scope(x.estimate.decode_step if x.phase_step == "decode" else x.estimate.prefill_step)
    where = f" ({scope})" if scope == STAGE_SCOPE else ""
    t = Table(title=f"{x.phase_step} step by category{where}")
    t.add_column("category")
    t.add_column("ms", justify="right")
    t.add_column("share", justify="right")
    for c in CATEGORIES:
        t.add_row(c, f"{x.categories[c] * 1e3:,.2f}", f"{x.categories[c] / total:.1%}")
    con.print(t)
    con.print(f"bottleneck: [bold]{x.bottleneck}[/bold] ({x.categories[x.bottleneck] / total:.0%} of the step)")
    con.print(
        f"hardware limit of this step{where}: {x.speed_of_light_s * 1e3:,.2f} ms "
        f"(all FLOPs at peak or all bytes at full bandwidth); the model predicts "
        f"{total * 1e3:,.2f} ms, {total / x.speed_of_light_s:,.1f}x the limit"
    )
    if x.fallbacks:
        con.print(f"[yellow]CUDA-core fallback kernels in use: {', '.join(x.fallbacks)}[/yellow]")
        for k, why in x.chosen_by.items():
            con.print(f"[dim]  {k}: {why}[/dim]")
    if x.rate is not None and x.held is not None:
        title = (
            f"what one change buys: throughput at the load {x.rate:,.4g} req/s keeps in flight ({x.held:,.3g} "
            f"requests; the capacity the change adds), and TPOT at {x.rate:,.4g} req/s itself (where the rate fixes "
            "the throughput)"
        )
        cols: tuple[str, ...] = ("change", "out tok/s/GPU", "TPOT ms", "gain", "TPOT ms at the rate", "note")
    else:
        # no traffic stated: each change runs at its own saturated point, whose requests in flight differ (sixteenth
        # trial: NVFP4 experts read '+36%' at 139.8 ms TPOT under 'same concurrency', priced at 8,222 vs 3,653)
        how = "each at its own saturated throughput: requests in flight differ" if x.saturated else "same concurrency"
        title, cols = f"what one change buys ({how})", ("change", "out tok/s/GPU", "TPOT ms", "gain", "note")
    lt = Table(title=title)
    for col in cols:
        lt.add_column(col, justify="left" if col in ("change", "note") else "right")
    for lv in x.levers:
        cells = [
            lv.name,
            "-" if lv.output_tok_s_per_gpu is None else f"{lv.output_tok_s_per_gpu:,.1f}",
            "-" if lv.tpot_ms is None else f"{lv.tpot_ms:,.2f}",
            "-" if lv.gain is None else f"{lv.gain:+.0%}" if abs(lv.gain) >= 0.005 else "0%",  # not '-0%'
        ]
        if len(cols) == 6:
            cells.append("-" if lv.tpot_at_rate_ms is None else f"{lv.tpot_at_rate_ms:,.2f}")
        lt.add_row(*cells, lv.note)
    if x.levers:
        con.print(lt)
    else:
        con.print(
            "what one change buys: nothing to try: the deployment already runs each change explain prices "
            "(tensor-core kernels, FP8 attention/KV, FP8 dense weights, NVFP4 experts (or a dense model's NVFP4 "
            "weights) on Blackwell, CUDA graphs, MTP, EP overlap) "
            "or the model or hardware has no such part",
            markup=False,
        )


def explanation_dict(x: Explanation) -> dict[str, Any]:
    return {
        "estimate": estimate_dict(x.estimate),
        "phase_step": x.phase_step,
        "by_category_ms": {k: round(v * 1e3, 4) for k, v in x.categories.items()},
        "by_category_scope": ops_scope(x.estimate.decode_step if x.phase_step == "decode" else x.estimate.prefill_step),
        "bottleneck": x.bottleneck,
        "speed_of_light_ms": round(x.speed_of_light_s * 1e3, 4),
        "levers_priced_each_saturated": x.saturated,
        "fallback_kernels": x.fallbacks,
        "fallback_kernels_chosen_by": x.chosen_by,
        "levers": [
            {
                "change": lv.name,
                "output_tok_s_per_gpu": lv.output_tok_s_per_gpu,
                "tpot_ms": lv.tpot_ms,
                "gain": lv.gain,
                "tpot_ms_at_rate": lv.tpot_at_rate_ms,
                "note": lv.note,
            }
            for lv in x.levers
        ],
        "levers_priced_at": {"request_rate": x.rate, "in_flight": x.held} if x.rate is not None else "same concurrency",
    }


def _num(v: float) -> str:
    """Four significant digits, never an exponent: 26,160 and 6.885, not 2.616e+04."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def _no_tpot(e: Metrics) -> str:
    return "answers of one token" if e.one_token else f"not in a {e.mode} phase"


def print_validation(con: Console, results: list[AnchorResult], summary: dict[str, Any]) -> None:
    t = Table(title="anchors: predicted vs published")
    for col in ("id", "metric", "published", "predicted", "error", "tol", "ok", "method"):
        t.add_column(
            col, justify="right" if col in ("published", "predicted", "error", "tol") else "left", no_wrap=col == "id"
        )
    for r in results:
        pred = "-" if r.predicted is None else _num(r.predicted)
        err = "-" if r.rel_error is None else f"{r.rel_error:+.1%}"
        ok = "[green]yes[/green]" if r.within_tolerance else ("[red]error[/red]" if r.error else "[red]no[/red]")
        t.add_row(
            Text(r.id),  # user text: never read as rich markup
            Text(r.metric),
            _num(r.published) if r.published is not None else "-",
            pred,
            err,
            f"{r.tolerance:.0%}",
            ok,
            "-" if r.error else r.method,  # nothing was predicted
        )
    con.print(t)
    for r in results:  # what the traffic was read as where the anchor left it out (the JSON lists every assumption)
        for a in (a for a in r.assumed if a.startswith("workload")):
            con.print(f"{r.id}: assumed {a}", markup=False)
    for r in results:
        if r.error:
            con.print(Text(f"{r.id}: {r.error}", style="red"))
    med = summary["median_abs_rel_error"]
    con.print(
        f"{summary['within_tolerance']} of {summary['count']} within tolerance; "
        f"{summary['predicted']} predicted; median |error| "
        f"{'-' if med is None else f'{med:.1%}'}"
    )


def print_simulation(con: Console, title: str, m: dict[str, Any], slo: Any = None) -> None:
    """The simulated percentiles and rates; with the scenario's `slo`, each target against its `statistic`
    (p90 unless stated: the plan's default reading of a target)."""
    t = Table(title=f"{title}: simulated")
    for col in ("metric", "mean", "p50", "p90", "p99"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for key in ("ttft_ms", "tpot_ms", "e2e_ms", "queue_ms"):
        st = m[key]
        t.add_row(key, *("-" if st[q] is None else f"{st[q]:,.1f}" for q in ("mean", "p50", "p90", "p99")))
    con.print(t)
    v = slo_verdict(m, slo)
    if v is not None:
        said = [f"{k.split('_')[0].upper()} {v['statistic']} {got:,.1f} ms {'<=' if got <= v['targets'][k] else '>'} "
                f"{v['targets'][k]:,g}" for k, got in v["achieved"].items()]  # fmt: skip
        why = f" ({v['why']})" if v["why"] else ""
        con.print(f"slo: {'; '.join(said)}: {v['verdict']}{why}", markup=False)
    s = Table(show_header=False)
    s.add_column("metric")
    s.add_column("value", justify="right")
    for key in (
        "output_tok_s",
        "output_tok_s_per_gpu",
        "input_tok_s_per_gpu",
        "output_tok_s_per_user",
        "gpus",
        "requests_completed",
        "requests_warm_start",
        "requests_measured",
        "requests_dropped",
        "requests_preempted",
        "goodput",
        "sim_time_s",
        "wall_time_s",
    ):
        v = m.get(key)
        if key in ("requests_warm_start", "requests_measured") and v is None:
            continue
        if key == "requests_warm_start" and not v:
            continue
        # the one tokens-per-user of every view: say which TPOT it divides
        label = {
            "output_tok_s_per_user": "output_tok_s_per_user (1000 / mean TPOT)",
            "requests_warm_start": "requests_warm_start (in flight at 0 s, in requests_completed, never measured)",
            # the percentiles' population: past the warm-up share too, so not completed - warm start (ninth trial)
            "requests_measured": "requests_measured (the latencies' population)",
        }.get(key, key)
        s.add_row(label, "-" if v is None else (f"{v:,.2f}" if isinstance(v, float) else f"{v:,}"))
    kv = m["kv_utilization"]
    s.add_row("kv_utilization (mean / max)", f"{kv['mean']:.1%} / {kv['max']:.1%}")
    con.print(s)
    for key in ("traffic", "slice", "traffic_note", "warning"):
        if m.get(key):
            con.print(f"{key.replace('_', ' ')}: {m[key]}", markup=False)
    dropped = m.get("requests_dropped") or 0
    if dropped:  # the reasons were in the JSON only, and the percentiles' population unsaid (sixteenth trial)
        why = "; ".join(f"{n:,} {r}" for r, n in (m.get("requests_dropped_by_reason") or {}).items())
        done = m.get("requests_completed") or 0
        con.print(
            f"dropped: {dropped:,} of {dropped + done:,} requests ({why or 'reason not recorded'}); the latencies "
            f"above are the {done:,} that completed",
            markup=False,
        )
    for note in m.get("notes") or []:  # e.g. malformed trace rows skipped
        con.print(f"note: {note}", markup=False)
    if m.get("assumed"):
        con.print("[dim]assumed:[/dim]")
        for a in m["assumed"]:
            con.print(f"  - {a}", markup=False)
