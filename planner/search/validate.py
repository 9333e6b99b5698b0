"""`planner validate`: predict every anchor of a file (format: shared/validation/README.md) and
compare with the published value.

Each anchor is parsed, resolved and predicted on its own: a bad anchor (a wrong type, a NaN or
infinite value, a setting the model cannot run, a prediction that is not a finite number)
becomes a row with `predicted: null` and its reason in one line, never a crash of the whole
file. The method is `estimate` (the steady-state estimator) for prefill and decode anchors and kernel-share metrics;
end-to-end latency and throughput anchors are simulated (closed loop at the anchor's concurrency) and say `simulate`,
and so is an end-to-end `max_users_at_slo` (a search over concurrency that the estimator's answer brackets), so
a deployment's users within its SLO agree with its simulated latencies.
"""

from __future__ import annotations

import datetime
import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from planner.inputs import trtllm_bench
from planner.inputs.benchmarks import PRESETS, client_for
from planner.inputs.edge import check_tree, format_validation_error, one_line
from planner.inputs.scenario import Scenario, ScenarioError, load_yaml, parse_as
from planner.model.defaults import Resolved
from planner.model.estimator import estimate, max_users_at_slo
from planner.model.metrics import Metrics
from planner.search import mtp_choice
from planner.search.anchor_sim import (
    SIMULATED,
    offline_requests,
    simulated_max_users,
    simulated_offline,
    simulated_value,
)
from planner.search.anchor_units import LATENCY_METRICS, THROUGHPUT_METRICS, unit_error
from planner.search.loadgen import CLIENT as LOADGEN
from planner.search.loadgen import LoadGenRun
from planner.search.loadgen import predict as loadgen_predict
from planner.search.unknowns import resolve_any, search_deployment
from roofline.errors import CatalogError, DeploymentError, PlannerError, PrecisionError
from simulator.config import SimConfigError
from simulator.traces import TraceError

Metric = Literal[
    "input_tok_s_per_gpu",
    "output_tok_s_per_gpu",
    "total_tok_s_per_gpu",
    "output_tok_s",
    "output_tok_s_per_user",
    "ttft_ms",
    "tpot_ms",
    "e2e_ms",
    "max_users_at_slo",
    "decode_time_share_attention",
    "decode_time_share_moe",
]


class Anchor(Scenario):
    id: str = Field(pattern=r"^[a-z0-9-]+$")
    source: str = ""
    metric: Metric
    value: float = Field(gt=0)  # every metric is a positive rate, time, count or share
    unit: str = ""
    tolerance: float = Field(default=0.15, gt=0, le=10)
    notes: str = ""
    # provenance of published anchors (validation/public/): where and when, the words quoted
    url: str = ""
    date: str | datetime.date = ""  # YAML reads an unquoted 2025-01-31 as a date
    quote: str = ""
    derived: bool = False  # the value was computed from quoted numbers (the derivation is in notes)
    # the benchmark client that measured it, where the source says (planner.inputs.benchmarks PRESETS);
    # None: the engine's own serving benchmark
    client: Literal[(*PRESETS, LOADGEN)] | None = None  # type: ignore[valid-type]
    # the LoadGen run's length as its log states it ('Test Parameters Used'); only with client
    # mlperf-loadgen-server (planner.search.loadgen), whose defaults are mlperf.conf's
    loadgen: LoadGenRun | None = None
    # which statistic over requests a latency value is (ttft_ms, tpot_ms, e2e_ms; output_tok_s_per_user is
    # 1000 / TPOT of that statistic, as InferenceX's interactivity = 1000 / median TPOT): a simulated
    # prediction reads the same statistic of its requests; the steady-state estimate has only the mean
    statistic: Literal["mean", "median"] = "mean"
    # what the source picked its (unstated) deployment for, where it says: e.g. InferenceX's 'one row per GPU
    # showing the highest-throughput configuration' also for the row's TPOT; None: the metric's own goal
    deployment_chosen_for: Literal["throughput", "latency"] | None = None

    @model_validator(mode="after")
    def _unit_agrees(self) -> Anchor:
        why = unit_error(self.metric, self.unit)
        if why:
            raise ValueError(why)
        if self.loadgen is not None and self.client != LOADGEN:
            raise ValueError(f"loadgen: describes a LoadGen run; give it with client: {LOADGEN}")
        return self


@dataclass(slots=True)
class AnchorResult:
    id: str
    metric: str
    published: float | None
    predicted: float | None
    rel_error: float | None
    within_tolerance: bool
    method: str  # estimate or simulate; none where the anchor could not be predicted (error)
    assumed: list[str] = field(default_factory=list)
    error: str | None = None
    tolerance: float = 0.15
    input_error: bool = False  # the error is the anchor's input (exit 2), not a prediction found impossible


# errors that say the anchor's input is wrong (a field that does not parse, an unknown id, a setting no
# deployment of this model or GPU can run: shared/validation/README.md); any other PlannerError is a
# prediction that found the stated setup impossible (weights or KV that do not fit, no concurrency meeting
# the slo, a missing kernel), a documented row rather than an input error
INPUT_ERRORS = (ScenarioError, CatalogError, PrecisionError, DeploymentError, SimConfigError, TraceError)


# what a one-phase estimate does not price: the metric would read 0 (a -100% error), not a prediction
PHASE_ABSENT = {
    "decode": {"ttft_ms", "e2e_ms", "input_tok_s_per_gpu"},
    "prefill": {"tpot_ms", "e2e_ms", "output_tok_s", "output_tok_s_per_gpu", "output_tok_s_per_user"},
}


def metric_value(metric: str, est: Metrics) -> float:
    if metric in PHASE_ABSENT.get(est.mode, ()):
        raise ScenarioError(f"metric: {metric} is not priced in a {est.mode} phase (phase: end-to-end prices it)")
    step = est.decode_step
    values: dict[str, Any] = {
        "input_tok_s_per_gpu": est.input_tok_s_per_gpu,
        "output_tok_s_per_gpu": est.output_tok_s_per_gpu,
        "total_tok_s_per_gpu": est.total_tok_s_per_gpu,
        "output_tok_s": est.output_tok_s,
        "output_tok_s_per_user": est.output_tok_s_per_user,
        "ttft_ms": est.ttft_s * 1e3,
        "tpot_ms": est.tpot_s * 1e3,
        "e2e_ms": est.e2e_s * 1e3,
        "decode_time_share_attention": step.share("attention") if step else None,
        "decode_time_share_moe": step.share("moe") if step else None,
    }
    v = values[metric]
    if v is None:
        raise ScenarioError(f"metric: {metric} needs a decode step; this anchor's phase has none")
    return float(v)


def _number(v: Any) -> float | None:
    """A finite real number from raw input, else None (for rows of anchors that did not parse)."""
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def predict_anchor(raw: Any, base_dir: Path) -> AnchorResult:
    d = raw if isinstance(raw, dict) else {}
    aid = one_line(str(d.get("id", "?")), 300)  # the id keys result rows: long enough to stay whole
    metric = one_line(str(d.get("metric", "?")), 60)
    published = _number(d.get("value"))
    tol = _number(d.get("tolerance")) or 0.15
    try:
        check_tree(raw, f"anchor {aid}")
        a, notes = _benchmark_reading(parse_as(Anchor, raw, f"anchor {aid}", "anchor"), base_dir)
        predicted, method, assumed = _predict(a, base_dir)
    except ValidationError as exc:  # a derived setting (e.g. the MTP config) that does not validate
        return AnchorResult(
            aid,
            metric,
            published,
            None,
            None,
            False,
            "none",
            [],
            format_validation_error(exc, f"anchor {aid}"),
            tol,
            True,
        )
    except PlannerError as exc:
        why = one_line(str(exc), 600)
        bad = isinstance(exc, INPUT_ERRORS)
        return AnchorResult(aid, metric, published, None, None, False, "none", [], why, tol, bad)
    rel = (predicted - a.value) / a.value
    ok = abs(rel) <= a.tolerance
    return AnchorResult(a.id, a.metric, a.value, predicted, rel, ok, method, [*notes, *assumed], None, a.tolerance)


def _benchmark_reading(a: Anchor, base_dir: Path) -> tuple[Anchor, list[str]]:
    """What a published number means when its traffic is not stated (shared/validation/README.md):
    a latency metric is the lowest latency, one request in flight; a throughput metric with
    neither concurrency nor rate is an offline, saturated run (the estimator's default). An unknown
    MTP on a latency at one request in flight is on (`planner.search.mtp_choice`); a trtllm-bench
    run's unstated engine limits are trtllm-bench's own (`planner.inputs.trtllm_bench`)."""
    w = a.workload
    stated = isinstance(w.concurrency, int) or w.request_rate is not None
    notes: list[str] = []
    if a.metric in LATENCY_METRICS and not stated:
        workload = w.model_copy(update={"concurrency": 1, "concurrency_scope": "total"})
        a = a.model_copy(update={"workload": workload})
        notes.append("workload.concurrency: 1 (a latency metric with no traffic)")
    a, mtp_notes = mtp_choice.for_latency_at_one(a, a.metric, base_dir)
    a, bench_notes = trtllm_bench.for_anchor(a, base_dir) if a.client == "trtllm-bench" else (a, [])
    return a, [*notes, *bench_notes, *mtp_notes]


def _predict(a: Anchor, base_dir: Path) -> tuple[float, str, list[str]]:
    """(predicted value, method, assumed) for one parsed anchor; a non-finite prediction is an error."""
    if a.slo is not None and a.slo.statistic is not None:  # a scenario's field, which no anchor path reads
        raise ScenarioError(
            f"anchor {a.id}: slo.statistic: not read in anchors (their SLO-bound metrics compare means, MLPerf "
            "LoadGen runs its p99); remove it"
        )
    value, method, assumed = _predict_mtp(a, base_dir)
    if not math.isfinite(value):
        raise PlannerError(f"anchor {a.id}: the prediction of {a.metric} is not a finite number ({value})")
    return value, method, assumed


def _predict_mtp(a: Anchor, base_dir: Path) -> tuple[float, str, list[str]]:
    """An SLO-bound metric with MTP unknown: the most the slo allows, MTP off or on."""
    slo_bound = a.metric == "max_users_at_slo" or (a.metric in THROUGHPUT_METRICS and a.slo is not None)
    tries = mtp_choice.settings(a, base_dir) if slo_bound and a.phase == "end-to-end" else None
    if not tries:
        return _predict_any(a, base_dir)
    outs, errors = [], []
    for on in tries:
        try:
            outs.append(_predict_any(mtp_choice.with_mtp(a, on), base_dir))
        except PlannerError as exc:
            errors.append(exc)
    if not outs:
        raise errors[0]
    value, method, assumed = max(outs, key=lambda o: o[0])
    return value, method, [*assumed, "mtp: searched (unknown; the most meeting the slo, off or on)"]


def _predict_any(a: Anchor, base_dir: Path) -> tuple[float, str, list[str]]:
    if a.client != LOADGEN:
        return _predict_default(a, base_dir)
    # LoadGen's Server run (planner.search.loadgen), on the stated deployment or the one searched for the metric
    res = resolve_any(a, base_dir, a.metric)
    value, notes = loadgen_predict(res, a.metric, a.slo, a.loadgen or LoadGenRun(), a.phase, a.statistic)
    return value, "simulate", [*res.assumed, *notes]


def _predict_default(a: Anchor, base_dir: Path) -> tuple[float, str, list[str]]:
    slo_bound = a.metric in THROUGHPUT_METRICS and a.slo is not None and a.phase == "end-to-end"
    if slo_bound and not a.deployment.known:
        assert a.slo is not None
        _, notes, point = search_deployment(a, a.metric, base_dir)  # the best deployment meeting the slo
        assert point is not None
        return metric_value(a.metric, point.metrics), "estimate", [*notes, "throughput: the highest meeting the slo"]
    goal = {"throughput": "output_tok_s_per_gpu", "latency": "tpot_ms", None: a.metric}[a.deployment_chosen_for]
    res = resolve_any(a, base_dir, goal)
    if a.metric == "decode_time_share_moe" and not res.model.moe_layers:  # it read 0 (-100%; trial)
        raise ScenarioError(f"metric: decode_time_share_moe needs MoE layers; {res.model.id} has none")
    if a.metric == "max_users_at_slo" or slo_bound:
        if a.slo is None:
            raise ScenarioError(f"anchor {a.id}: metric max_users_at_slo needs an slo")
        users, est = max_users_at_slo(res, a.slo.ttft_ms, a.slo.tpot_ms, a.slo.e2e_ms)
        if a.metric == "max_users_at_slo":
            if a.phase != "end-to-end":
                return float(users), "estimate", res.assumed
            client = client_for(a.engine if a.engine != "unknown" else "other", a.client)
            return float(simulated_max_users(res, a.slo, users, client)), "simulate", res.assumed
        if not users or est is None:
            raise PlannerError(f"anchor {a.id}: no concurrency of this deployment meets the slo")
        return (
            metric_value(a.metric, est),
            "estimate",
            [*res.assumed, f"throughput at {users} users, the most meeting the slo"],
        )
    simulated = _simulated(a, res)
    if simulated is not None:
        return simulated
    median = a.statistic == "median" and a.metric in LATENCY_METRICS
    notes = [f"{a.metric}: the estimate's mean stands for the published median"] if median else []
    return metric_value(a.metric, estimate(res)), "estimate", [*res.assumed, *notes]


def _simulated(a: Anchor, res: Resolved) -> tuple[float, str, list[str]] | None:
    """An end-to-end anchor the simulation answers: an offline run of a stated size (the client's whole
    dataset at once, `anchor_sim.simulated_offline`), or a metric at the anchor's concurrency or rate."""
    if a.phase != "end-to-end":
        return None
    requests = offline_requests(res, a.client)
    if a.metric in THROUGHPUT_METRICS and requests:
        notes = [f"traffic: an offline run of {requests:,} requests enqueued at once ({a.client}), whole span"]
        return simulated_offline(a.metric, res, a.client or "", requests), "simulate", [*res.assumed, *notes]
    if a.metric in SIMULATED and (res.concurrency or res.request_rate):
        client = client_for(a.engine if a.engine != "unknown" else "other", a.client)
        return simulated_value(a.metric, res, client, a.statistic), "simulate", res.assumed
    return None


def validate_file(path: str | Path) -> tuple[list[AnchorResult], dict[str, Any]]:
    p = Path(path)
    data = load_yaml(p, finite=False)  # a NaN or infinity is an error row of its anchor, not of the file
    if not isinstance(data, dict) or "anchors" not in data:
        raise ScenarioError(f"{p}: expected `version: 1` and an `anchors:` list")
    if data.get("version") != 1:
        raise ScenarioError(f"{p}: version must be 1 (got {data.get('version')!r})")
    anchors = data["anchors"] or []
    if not isinstance(anchors, list):
        raise ScenarioError(f"{p}: `anchors` must be a list")
    results, seen = [], set()
    for a in anchors:
        aid = a.get("id") if isinstance(a, dict) else None
        if isinstance(aid, str) and aid in seen:  # rows are keyed by id: a second one would shadow the first
            why = f"anchor {one_line(aid, 300)}: id: already used by an earlier anchor of this file; ids must be unique"
            metric, tol = one_line(str(a.get("metric", "?")), 60), _number(a.get("tolerance")) or 0.15
            row = AnchorResult(aid, metric, _number(a.get("value")), None, None, False, "estimate", [], why, tol, True)
            results.append(row)
            continue
        if isinstance(aid, str):  # an id of another type is that anchor's own error row (predict_anchor)
            seen.add(aid)
        results.append(predict_anchor(a, p.parent))
    errs = [abs(r.rel_error) for r in results if r.rel_error is not None]
    summary = {
        "count": len(results),
        "predicted": sum(r.predicted is not None for r in results),
        "within_tolerance": sum(r.within_tolerance for r in results),
        "median_abs_rel_error": round(statistics.median(errs), 4) if errs else None,
    }
    return results, summary


def results_json(results: list[AnchorResult], summary: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for r in results:
        d = asdict(r)
        d.pop("tolerance")
        d.pop("input_error")  # the documented row (shared/validation/README.md); the exit status says it
        if d["rel_error"] is not None:
            d["rel_error"] = round(d["rel_error"], 4)
        rows.append(d)
    return {"results": rows, "summary": summary}
