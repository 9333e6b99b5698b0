"""The `planner` command line: catalog, estimate, explain, simulate, validate, plan, compare.

Thin: parses arguments, calls the Python API, renders with `planner.report.report`. A `PlannerError`
(bad input, a deployment that does not fit) prints one line and exits with status 2, never a
traceback; so does an argument the parser refuses (`main`, the installed script). The app, its consoles and
that error handling are `planner.cli_shell`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from planner.cli_shell import JsonFlag, app, con, err, main, out, user_errors, writable
from planner.inputs.edge import json_text
from planner.inputs.question import (
    DEFAULT_QUESTION,
    build_question,
    load_question,
    replaced_targets,
    target_parts,
    trace_beside,
)
from planner.inputs.scenario import Scenario, load_scenario, load_yaml
from planner.model.estimator import estimate as run_estimate
from planner.model.explain import explain as run_explain
from planner.model.simulate import default_warm_start, run_simulation, standard_config
from planner.report import track_record
from planner.report.catalog_report import print_catalog
from planner.report.plan_chart import write_chart
from planner.report.plan_report import answer_dict, print_answer, write_scenarios
from planner.report.report import (
    estimate_dict,
    explanation_dict,
    print_estimate,
    print_explanation,
    print_simulation,
    print_validation,
)
from planner.report.verdicts import slo_verdict, slot_caveat
from planner.search.plan import plan as run_plan
from planner.search.unknowns import resolve_any
from planner.search.validate import results_json, validate_file
from roofline.catalog import get_hardware, get_model
from roofline.errors import PlannerError
from simulator import SimConfig
from simulator.metrics import write_records, write_timeseries


@app.command()
@user_errors
def catalog(what: Annotated[str, typer.Argument(help="models or hardware")] = "all") -> None:
    """List the models and GPU systems the planner knows."""
    if what not in ("all", "models", "hardware"):
        raise PlannerError(f"catalog: unknown section {what!r}; allowed: all, models, hardware")
    print_catalog(con, what)


def _estimate(s: Scenario, base: Path | None, concurrency: float | None, as_json: bool, title: str) -> None:
    res = resolve_any(s, base)
    est = run_estimate(res, concurrency)
    track = track_record.note(res.deployment, res.phase)
    caveat = slot_caveat(res, est) if concurrency is None else None
    if as_json:
        out(json_text({**estimate_dict(est), "caveat": caveat, "track_record": track}))
    else:
        print_estimate(con, title, est)
        if caveat:
            con.print(caveat, style="yellow", markup=False)
        if track:
            con.print(track, style="dim")


@app.command()
@user_errors
def estimate(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML (see examples/)")],
    concurrency: Annotated[float | None, typer.Option(help="total requests in flight (overrides the file)")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Steady-state TTFT, TPOT, throughput, step breakdown and memory for a scenario."""
    if concurrency is not None and not (math.isfinite(concurrency) and 1 <= concurrency <= 1e7):
        # half a closed-loop client is no client (trial, twenty-first session: 0.5 printed batch 0.5)
        raise PlannerError(f"--concurrency: a number of requests in flight in [1, 1e7] (got {concurrency:g})")
    s = load_scenario(scenario)
    _estimate(s, scenario.parent, concurrency, as_json, s.name)


@app.command()
@user_errors
def explain(scenario: Annotated[Path, typer.Argument(help="scenario YAML")], as_json: JsonFlag = False) -> None:
    """Where the time goes, the hardware limit, and which change buys the most."""
    s = load_scenario(scenario)
    x = run_explain(resolve_any(s, scenario.parent))
    if as_json:
        out(json_text(explanation_dict(x)))
    else:
        con.print(f"[bold]{s.name}[/bold]")
        print_explanation(con, x)


@app.command()
@user_errors
def simulate(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML (optionally with a `simulation:` section)")],
    as_json: JsonFlag = False,
    records: Annotated[Path | None, typer.Option(help="write per-request records (CSV)")] = None,
    timeseries: Annotated[Path | None, typer.Option(help="write per-step time series (CSV)")] = None,
    requests: Annotated[int | None, typer.Option(help="number of requests (overrides the file)")] = None,
    seed: Annotated[int | None, typer.Option(help="random seed (overrides the file)")] = None,
) -> None:
    """Discrete-event simulation: percentiles, throughput, KV use, goodput, preemptions."""
    writable("--records", records)
    writable("--timeseries", timeseries)
    s = load_scenario(scenario)
    res = resolve_any(s, scenario.parent)
    cfg = s.simulation or SimConfig()
    keep = {"warm_start": min(default_warm_start(res, cfg), requests)} if requests is not None else {}
    # --requests changes the run's length, not how it starts: the default run's warm start stays (a stated count
    # alone runs from idle; trial, twenty-first session: 2,959 tok/s/GPU against the default run's 5,000)
    given = {k: v for k, v in (("requests", requests), ("seed", seed)) if v is not None}
    cfg = cfg.model_copy(update={**given, **keep})
    if as_json or not err.is_terminal:  # a progress bar only where one is seen (piped, it left a blank line)
        result, summary = run_simulation(res, cfg, scenario.parent)
    else:
        with Progress(
            TextColumn("simulating"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        ) as bar:
            task = bar.add_task("sim", total=standard_config(res, cfg).requests)
            result, summary = run_simulation(
                res, cfg, scenario.parent, progress=lambda done: bar.update(task, completed=done)
            )
    for path, writer in ((records, write_records), (timeseries, write_timeseries)):
        if path is not None:
            tmp = path.with_name(path.name + ".part")
            writer(result, tmp)
            tmp.replace(path)  # never leave a half-written file behind
    track = track_record.note(res.deployment, res.phase)
    if as_json:
        out(json_text({**summary, "slo": slo_verdict(summary, res.slo), "track_record": track}))
    else:
        print_simulation(con, s.name, summary, res.slo)
        if track:
            con.print(track, style="dim")


@app.command()
@user_errors
def calibrate(
    ops: Annotated[
        str, typer.Option(help="comma-separated op families")
    ] = "mla_decode,attn_prefill,gemm,moe_gemm,elementwise",
    out: Annotated[Path, typer.Option(help="profile JSON (resumed if it exists)")] = Path("profile.json"),
    budget_minutes: Annotated[float, typer.Option(help="stop after this long; rerun to resume")] = 8.0,
    no_check: Annotated[bool, typer.Option("--no-check", help="skip the reference checks")] = False,
) -> None:
    """Time op shapes on the local GPU and write a calibration profile with provenance."""
    from runtime import calibrate as run_calibrate  # noqa: PLC0415  (torch is an optional extra)

    run_calibrate(ops, out, budget_minutes * 60, check=not no_check, log=con.print)


@app.command()
@user_errors
def validate(
    anchors: Annotated[Path, typer.Argument(help="anchor file (shared/validation format)")], as_json: JsonFlag = False
) -> None:
    """Predict every anchor of a file and compare with the published values. Every row is printed; the
    exit status is 2 when some anchor's input is invalid (its row names the field and what is allowed)."""
    results, summary = validate_file(anchors)
    if as_json:
        out(json_text(results_json(results, summary)))
    else:
        print_validation(con, results, summary)
    bad = [r.id for r in results if r.input_error]
    if bad:
        raise PlannerError(f"{len(bad)} of {len(results)} anchors are invalid input (see their rows): {', '.join(bad)}")


@app.command()
@user_errors
def plan(
    question: Annotated[Path | None, typer.Option(help="question YAML (fields of planner.inputs.question)")] = None,
    model: Annotated[str | None, typer.Option(help="catalog id or HF config.json")] = None,
    hardware: Annotated[str | None, typer.Option(help="catalog id")] = None,
    gpus: Annotated[int | None, typer.Option(help="GPU budget to fill")] = None,
    max_gpus: Annotated[int | None, typer.Option(help="upper bound on GPUs")] = None,
    isl: Annotated[int | None, typer.Option(help="input tokens per request")] = None,
    osl: Annotated[int | None, typer.Option(help="output tokens per request")] = None,
    workload: Annotated[
        Path | None, typer.Option(help="YAML `simulation:` section (trace, arrivals) for verification")
    ] = None,
    rate: Annotated[float | None, typer.Option(help="requests/s to serve")] = None,
    concurrency: Annotated[int | None, typer.Option(help="requests in flight to serve")] = None,
    ttft_p90: Annotated[float | None, typer.Option(help="p90 TTFT target, ms")] = None,
    tpot_p90: Annotated[float | None, typer.Option(help="p90 TPOT target, ms")] = None,
    e2e_p90: Annotated[float | None, typer.Option(help="p90 end-to-end target, ms")] = None,
    ttft_p99: Annotated[float | None, typer.Option(help="p99 TTFT target, ms (p99 targets replace p90s)")] = None,
    tpot_p99: Annotated[float | None, typer.Option(help="p99 TPOT target, ms")] = None,
    e2e_p99: Annotated[float | None, typer.Option(help="p99 end-to-end target, ms")] = None,
    optimize: Annotated[str | None, typer.Option(help="throughput-per-gpu | gpus | cost")] = None,
    price_per_gpu_hour: Annotated[float | None, typer.Option(help="USD per GPU-hour")] = None,
    engine: Annotated[str | None, typer.Option(help="sglang | trtllm | vllm | other (generic profile)")] = None,
    checkpoint: Annotated[
        str | None, typer.Option(help="HF repo id or path the launch commands load (needed for a config.json model)")
    ] = None,
    workers: Annotated[int | None, typer.Option(help="local processes (default: all cores)")] = None,
    ray: Annotated[str | None, typer.Option("--ray", help="Ray cluster address (needs the `ray` extra)")] = None,
    chart: Annotated[Path | None, typer.Option(help="write the Pareto chart as HTML")] = None,
    scenarios: Annotated[
        Path | None,
        typer.Option(
            help="folder (created if missing) for each row's scenario (rec<N>_scenario.yaml) "
            "to rerun with `planner simulate`"
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Recommend deployments for a question. Fields not given keep the documented default question:
    DeepSeek-V3 on a GB200 NVL72 rack (at most 72 GPUs), 2k/1k tokens, p90 TTFT <= 2 s and TPOT <= 50 ms,
    best throughput per GPU, SGLang. Exit status 0 when a deployment is verified to meet the SLO, 1 when
    none is (the closest is still shown and written), 2 for bad input."""
    fields = {
        "model": model,
        "hardware": hardware,
        "gpus": gpus,
        "max_gpus": max_gpus,
        "isl": isl,
        "osl": osl,
        "rate": rate,
        "concurrency": concurrency,
        "optimize": optimize,
        "price_per_gpu_hour": price_per_gpu_hour,
        "engine": engine,
        "checkpoint": checkpoint,
    }
    slo = {"ttft_p90_ms": ttft_p90, "tpot_p90_ms": tpot_p90, "e2e_p90_ms": e2e_p90}
    slo |= {"ttft_p99_ms": ttft_p99, "tpot_p99_ms": tpot_p99, "e2e_p99_ms": e2e_p99}
    writable("--chart", chart)
    if workers is not None and workers < 1:  # 0 was taken silently (sixteenth trial)
        raise PlannerError(f"--workers: {workers} processes; allowed: 1 or more (default: all cores)")
    sim = None
    if workload is not None:
        data = load_yaml(workload)
        raw = data.get("simulation", data) if isinstance(data, dict) else data
        sim = trace_beside(raw, workload.parent, str(workload))
    base = load_question(question) if question else None
    q = build_question(fields, slo, base, sim)
    if dropped := replaced_targets(base or DEFAULT_QUESTION, slo):  # said, not silent (trial, twentieth session)
        said = ", ".join(f"{k.split('_')[0].upper()} {target_parts(k)[1]} <= {v:g} ms" for k, v in dropped.items())
        err.print(f"slo: the targets typed at {q.slo.statistic} replace the question's {said}", markup=False)
    if q.osl <= 1 and (tpot_p90 or tpot_p99):  # a typed TPOT target one-token answers cannot have (review)
        err.print(
            "slo: the TPOT target is not checked: answers of one token have no time per output token", markup=False
        )
    get_model(q.model)  # a model or hardware that does not resolve is one line before any folder is made
    get_hardware(q.hardware)
    if scenarios is not None:  # once the question stands (a rejected one left the folder behind), before the run
        try:
            scenarios.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            what = "a file is in the way" if scenarios.exists() and not scenarios.is_dir() else exc.strerror
            raise PlannerError(f"--scenarios: cannot create folder {str(scenarios)!r} ({what})") from None
    if as_json:
        ans = run_plan(q, workers, ray)
        out(json_text(answer_dict(ans)))
    else:
        with err.status("planning...") as status:
            ans = run_plan(q, workers, ray, progress=status.update)
        print_answer(con, ans)
    if chart is not None:
        write_chart(ans, chart)
    if scenarios is not None:
        paths = write_scenarios(ans, scenarios)
        err.print(
            f"{len(paths)} scenario{'s' if len(paths) != 1 else ''} written to {scenarios} "
            f"(planner simulate {paths[0]} reruns row 1)"
            if paths
            else "no recommendation: no scenario written",
            markup=False,
        )
    if not ans.feasible:  # the answer is "none meets" (printed, files written): a script can tell (grep's 1)
        raise typer.Exit(1)


@app.command()
@user_errors
def compare(
    model: Annotated[str, typer.Option(help="catalog id or HF config.json")] = "deepseek-v3",
    isl: Annotated[int, typer.Option(help="input tokens per request")] = 1024,
    osl: Annotated[int, typer.Option(help="output tokens per request")] = 1024,
    engine: Annotated[str, typer.Option(help="sglang | trtllm | vllm | other (generic profile)")] = "sglang",
    hardware: Annotated[str | None, typer.Option(help="comma-separated catalog ids (default: all)")] = None,
    price: Annotated[
        list[str] | None,
        typer.Option(
            help="USD per GPU-hour by hardware, e.g. h200-sxm=3.5,b200=5 "
            "(repeatable: the lists combine, one price per hardware)"
        ),
    ] = None,
    chart: Annotated[Path | None, typer.Option(help="write the frontiers as HTML")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Which GPU? The tok/s/GPU vs tok/s/user frontier of every system that can hold the model."""
    from planner.search.compare import compare as run_compare  # noqa: PLC0415
    from planner.search.compare import compare_dict, compare_figure, parse_prices, print_compare  # noqa: PLC0415

    writable("--chart", chart)
    if engine not in ("sglang", "trtllm", "vllm", "other"):
        raise PlannerError(f"--engine: unknown {engine!r}; allowed: sglang, trtllm, vllm, other")
    for flag, v in (("--isl", isl), ("--osl", osl)):
        if v <= 0:
            raise PlannerError(f"{flag}: a number of tokens, 1 or more (got {v})")
    hws = [h.strip() for h in hardware.split(",")] if hardware else None
    for h in hws or []:
        get_hardware(h)
    prices = parse_prices(",".join(price or []))
    get_model(model)
    with err.status("comparing..."):
        fronts = run_compare(model, isl, osl, engine, hws)
    data = {"question": {"model": model, "isl": isl, "osl": osl, "engine": engine}, **compare_dict(fronts, prices)}
    if as_json:
        out(json_text(data))
    else:
        print_compare(con, data)
    if chart is not None:
        fig = compare_figure(fronts, f"{model}, {isl}/{osl} tokens: throughput per GPU vs interactivity")
        tmp = chart.with_name(chart.name + ".part")
        fig.write_html(str(tmp), include_plotlyjs=True)
        tmp.replace(chart)


if __name__ == "__main__":
    main()
