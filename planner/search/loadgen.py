"""MLPerf LoadGen's Server scenario (also the LLM 'Interactive' scenario, which is the Server
scenario with tighter limits), as `planner validate` simulates an anchor that names it
(`client: mlperf-loadgen-server`). What LoadGen does, from its source
(github.com/mlcommons/inference, commit b66003e10e2db4b8c36a448b0545ec90fcc6e9e9, loadgen/):

- Arrivals: one sample per query, issued at Poisson times at the target rate (the log's 'Scheduled
  samples per second'), from an idle SUT; queries are scheduled until both `min_duration` has
  passed and `min_query_count` queries were issued (test_settings_internal.cc; results.cc
  MinDurationMet: final_query_scheduled_time >= min_duration; the log's 'Test Parameters Used'
  print both: 600000 ms for every LLM Server run, mlperf.conf `*.Server.min_duration = 600000`).
- Every issued sample is measured; no warm-up is left out (results.cc ProcessTokenLatencies sums
  over all `sample_count` samples).
- A sample's first-token latency is its issue to its first token; its time per output token is
  (latency - first-token latency) / (tokens - 1) (logging.cc RecordSampleCompletion), which the
  simulator's TPOT already is (simulator.metrics.latencies).
- 'Mean First Token latency' and 'Mean Time to Output Token' are the plain means over samples; a
  percentile is the sorted value at index floor(n x p) (results.cc).
- The constraints: the p99 first-token latency <= ttft_latency and the p99 TPOT <= tpot_latency
  (results.cc PerfConstraintsMet; mlperf.conf `*.Server.target_latency_percentile = 99`, which the
  token latencies use: results.h token_target_latency_percentile).
- 'Completed tokens per second' = output tokens / the time from the test start to the last
  sample's completion (results.cc: token_count / final_query_all_samples_done_time).
- How the harness reaches the engine is the run's `serving_path`. NVIDIA's harness (closed/NVIDIA/code
  llmlib, used by most submitters) runs llama3.1-8b and the Llama-2/3 benchmarks in its TRTLLM_EXECUTOR
  core, which enqueues token ids into the engine in process: no HTTP serving path (`request_overhead_ms`)
  in a sample's latency (the default). Its DeepSeek-R1 and gpt-oss-120b benchmarks run the
  TRTLLM_ENDPOINT core (code/<benchmark>/tensorrt/__init__.py DEFAULT_CORE_TYPE, v5.1 and v6.0), which
  posts each sample as a streaming OpenAI chat completion with `prompt_token_ids` to trtllm-serve (or a
  Dynamo frontend) over HTTP (llmlib/cores/openai_client_utils.py, http_async_client.py): the engine's
  serving path (`request_overhead_ms`, whole: its fit ran on prompts of a few hundred tokens, whose
  tokenization is a small part of it) is in its latency.

A submitter reports the highest rate it found whose run meets the constraints; `max_rate_within`
searches the same way on the simulation. A run has at most `simulator.config.MAX_REQUESTS` samples.
A longer LoadGen run on an aggregated pool of k identical instances is simulated on m < k of them
at m/k of the rate, over the run's whole length (`sampled`): the router spreads the Poisson arrivals
evenly over identical instances, so each sees 1/k of them whatever k is, and the deployment's tokens/s
is the m instances' times k/m. Cutting the run to its first samples instead ends the arrivals before a
large system fills (a 36-instance DeepSeek-R1 run takes 200,000 samples into its 184,000 running slots
without a queue, and reads a rate it cannot sustain). What m instances cannot hold within
MAX_REQUESTS either (one instance, or prefill/decode pools) is simulated for its first MAX_REQUESTS
samples (its latencies are theirs; its tokens/s their rate over the full run's length), and the
result says so.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from pydantic import Field

from planner.inputs.scenario import ScenarioError, SLOSpec
from planner.model.defaults import Resolved
from planner.model.estimator import estimate
from planner.model.simulate import run_simulation
from roofline.errors import PlannerError
from simulator import SimConfig, SimResult
from simulator.config import MAX_REQUESTS, MAX_STEPS, InputModel
from simulator.metrics import latencies

CLIENT = "mlperf-loadgen-server"
PERCENTILE = 0.99  # mlperf.conf *.Server.target_latency_percentile = 99
MIN_DURATION_MS = 600_000  # mlperf.conf *.Server.min_duration = 600000
MIN_QUERY_COUNT = 100  # loadgen/test_settings.h: min_query_count default
# A LoadGen run lasts what its log says (600 s of arrivals or min_query_count samples, then the drain):
# a 72-GPU DeepSeek-R1 Server run at 45 samples/s is about 1.8M forward steps over its 9 instances, an
# 8-instance gpt-oss Interactive run at 10 samples/s about 4M, past the default MAX_STEPS budget meant for
# the planner's own short runs. The budget still bounds a run that would not end.
LOADGEN_MAX_STEPS = 8 * MAX_STEPS


class LoadGenRun(InputModel):
    """A LoadGen Server run's length, as its log's 'Test Parameters Used' state it, and how its harness
    reaches the engine: `serving_path` True when it posts samples to the engine's HTTP server (NVIDIA's
    TRTLLM_ENDPOINT core), False in process (its TRTLLM_EXECUTOR core; the default)."""

    min_duration_ms: int = Field(default=MIN_DURATION_MS, ge=0, le=10**9)
    min_query_count: int = Field(default=MIN_QUERY_COUNT, ge=1, le=10**9)
    serving_path: bool = False


def full_run(rate: float, run: LoadGenRun) -> int:
    """The samples LoadGen issues at `rate`: min_query_count, or the rate over min_duration if more."""
    return max(run.min_query_count, math.ceil(rate * run.min_duration_ms / 1000.0))


def sampled(res: Resolved, rate: float, run: LoadGenRun) -> tuple[Resolved, float, float, list[str]]:
    """(deployment, rate, tokens/s scale, notes) to simulate for a LoadGen run at `rate`: the run itself,
    or, when its samples exceed MAX_REQUESTS on one aggregated pool of k instances, m = k x MAX_REQUESTS /
    samples (at least one) of those instances at m/k of the rate over the same length (scale k/m)."""
    n, pools = full_run(rate, run), res.deployment.pools
    if n <= MAX_REQUESTS or len(pools) != 1 or pools[0].role != "aggregated" or pools[0].instances < 2:
        return res, rate, 1.0, []
    k = pools[0].instances
    m = max(1, k * MAX_REQUESTS // n)  # < k, since n > MAX_REQUESTS
    part = replace(res, deployment=res.deployment.resized({"aggregated": m}))
    note = (
        f"LoadGen run: {n:,} samples at {rate:,.4g}/s simulated on {m} of the {k} identical instances at "
        f"{rate * m / k:,.4g}/s over the same length (the router splits the arrivals evenly; tokens/s x {k / m:.4g})"
    )
    return part, rate * m / k, k / m, [note]


def config(res: Resolved, rate: float, run: LoadGenRun, full: int | None = None) -> tuple[SimConfig, list[str]]:
    """The simulation of one LoadGen run at `rate` (of `full` samples; default: what LoadGen issues at
    that rate): Poisson arrivals from an idle start, every sample measured; the lengths the anchor's
    `simulation` section draws are kept."""
    full = full_run(rate, run) if full is None else full
    n = min(full, MAX_REQUESTS)
    given = res.simulation.model_dump(exclude_unset=True) if res.simulation is not None else {}
    if given.get("arrival") or given.get("trace"):
        raise PlannerError("client mlperf-loadgen-server: the simulation section must not set its own arrivals")
    # from idle (warm_start 0): LoadGen issues its first sample to an empty engine
    loop = {"requests": n, "warmup_fraction": 0.0, "cooldown_fraction": 0.0, "warmup_by": "arrival", "warm_start": 0}
    budget = {"max_steps": given.get("max_steps", LOADGEN_MAX_STEPS)}  # a stated budget is kept
    cfg = SimConfig.model_validate({**given, **loop, **budget})
    notes = []
    if full > n:
        notes.append(f"LoadGen run: the first {n:,} of its {full:,} samples simulated (simulator MAX_REQUESTS)")
    return cfg, notes


def _pct(x: np.ndarray, p: float) -> float:
    """LoadGen's percentile: the sorted value at index floor(n x p)."""
    s = np.sort(x)
    return float(s[min(int(len(s) * p), len(s) - 1)])


def stats(result: SimResult, full: int | None = None) -> dict[str, float]:
    """LoadGen's summary of a run: means and p99s over every sample (a dropped sample never
    completes: its latency counts as infinite), and completed output tokens per second. A run cut
    to its first samples (`full`: the samples LoadGen issues) keeps its own token rate over the
    full run's length, plus its own drain (last arrival to last completion) once, as LoadGen's
    tokens / final_query_all_samples_done_time counts it."""
    t = result.table
    lat = latencies(result)
    n = len(t)
    ok = ~np.isnan(t.finish) & ~t.dropped
    ttft = np.where(ok, lat["ttft"], np.inf)
    tpot = np.where(ok, np.nan_to_num(lat["tpot"], nan=0.0), np.inf)
    done = float(np.nanmax(t.finish[ok])) if ok.any() else math.inf
    if full and full > n and ok.any():
        issued = float(np.nanmax(t.arrival))
        scale = full / n
        done = issued * scale + (done - issued)
        tokens = float(t.osl[ok].sum()) * scale
    else:
        tokens = float(t.osl[ok].sum())
    return {
        "samples": float(n),
        "ttft_mean_s": float(ttft.mean()) if ok.all() else math.inf,
        "tpot_mean_s": float(tpot.mean()) if ok.all() else math.inf,
        "ttft_p99_s": _pct(ttft, PERCENTILE),
        "tpot_p99_s": _pct(tpot, PERCENTILE),
        "output_tok_s": tokens / done if ok.any() else 0.0,
    }


def run_at(res: Resolved, rate: float, run: LoadGenRun) -> tuple[dict[str, float], list[str]]:
    """One simulated LoadGen run of the deployment at `rate` samples/s (whole system)."""
    part, at_rate, scale, notes = sampled(res, rate, run)
    full = math.ceil(full_run(rate, run) / scale)  # the samples the simulated instances receive
    at = replace(part, request_rate=at_rate, concurrency=None)
    cfg, cut = config(at, at_rate, run, full)
    result, _ = run_simulation(at, cfg, extend=False)
    s = stats(result, full)
    s["output_tok_s"] *= scale
    return s, [*notes, *cut]


def meets(s: dict[str, float], slo: SLOSpec) -> bool:
    """LoadGen's PerfConstraintsMet: p99 first-token latency and p99 TPOT within the limits."""
    ttft_ok = slo.ttft_ms is None or s["ttft_p99_s"] * 1e3 <= slo.ttft_ms
    tpot_ok = slo.tpot_ms is None or s["tpot_p99_s"] * 1e3 <= slo.tpot_ms
    return ttft_ok and tpot_ok


RESOLUTION = 0.01  # the search stops when the passing and failing rates are within 1% of each other
MAX_PROBES = 24
# the bracket's steps from the estimator's saturated rate: a limit met near saturation (Server) is
# bracketed in one or two steps, a tight one (Interactive) in a few more, each cheaper (fewer samples)
STEP_UP, STEP_DOWN = 1.1, 0.8


def max_rate_within(res: Resolved, slo: SLOSpec, run: LoadGenRun) -> tuple[float, dict[str, float], list[str]]:
    """The highest Poisson rate whose simulated LoadGen run meets `slo` at p99, found as a submitter
    finds it (a rate that passes, one that fails, halved until within RESOLUTION), and that run's
    summary. The bracket starts at the estimator's saturated rate and steps by STEP_UP / STEP_DOWN.
    Raises PlannerError when even a rate of 1/64 of it fails."""
    cap = estimate(replace(res, request_rate=None, concurrency=None)).output_tok_s / max(res.osl, 1)
    if not math.isfinite(cap) or cap <= 0:
        raise PlannerError("LoadGen search: the estimator gives no saturated throughput to bracket the rate")
    probes: dict[float, tuple[dict[str, float], list[str]]] = {}

    def ok(rate: float) -> bool:
        probes[rate] = run_at(res, rate, run)
        return meets(probes[rate][0], slo)

    lo, hi = 0.0, cap
    if ok(hi):  # the estimate's saturated rate passes: step up until one fails
        lo, hi = hi, hi * STEP_UP
        while ok(hi) and len(probes) < MAX_PROBES:
            lo, hi = hi, hi * STEP_UP
    else:  # step down geometrically until one passes
        r = hi * STEP_DOWN
        while not ok(r):
            hi, r = r, r * STEP_DOWN
            if r < cap / 64:
                raise PlannerError(f"LoadGen search: no rate down to {r:.4g} samples/s meets the slo at p99")
        lo = r
    while hi - lo > RESOLUTION * hi and len(probes) < MAX_PROBES:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    best, notes = probes[lo]
    notes = [
        *notes,
        f"LoadGen search: {lo:,.4g} samples/s is the highest rate meeting the slo at p99 "
        f"({len(probes)} simulated runs; the next rate tried, {hi:,.4g}/s, fails)",
    ]
    return lo, best, notes


LATENCY = {"ttft_ms": "ttft", "tpot_ms": "tpot"}
THROUGHPUT = ("output_tok_s", "output_tok_s_per_gpu")


def predict(
    res: Resolved, metric: str, slo: SLOSpec | None, run: LoadGenRun, phase: str = "end-to-end", statistic: str = "mean"
) -> tuple[float, list[str]]:
    """An anchor measured by LoadGen's Server scenario: a throughput with an slo is the completed
    output tokens/s of the highest rate meeting it at p99; a mean TTFT or TPOT at a stated rate is
    that run's mean over every sample. Anything else is not a LoadGen Server measurement."""
    gpus = res.deployment.gpus
    if not run.serving_path:  # an in-process harness on token ids: no HTTP serving path in a sample's latency
        res = res.in_process()
    if phase != "end-to-end" or statistic != "mean":
        raise ScenarioError(f"client {CLIENT}: LoadGen reports end-to-end means (phase {phase}, statistic {statistic})")
    if metric in THROUGHPUT and slo is not None and (slo.ttft_ms or slo.tpot_ms):
        _, s, notes = max_rate_within(res, slo, run)
        tok = s["output_tok_s"] / (gpus if metric == "output_tok_s_per_gpu" else 1)
        return tok, notes
    if metric in LATENCY and res.request_rate:
        s, notes = run_at(res, res.request_rate, run)
        v = s[f"{LATENCY[metric]}_mean_s"] * 1e3
        if not math.isfinite(v):
            raise PlannerError(f"LoadGen run at {res.request_rate:g}/s: some samples never complete")
        return v, [*notes, f"LoadGen run at {res.request_rate:,.4g} samples/s: mean over all {s['samples']:,.0f}"]
    raise ScenarioError(
        f"client {CLIENT}: {metric} is measured by LoadGen's Server run as a throughput with ttft/tpot limits (slo) "
        "or a mean ttft_ms/tpot_ms at a request_rate"
    )
