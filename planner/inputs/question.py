"""The planning question: model, GPU system and budget, traffic, latency targets, objective.

From CLI flags or a YAML file (same fields). Traffic is a request rate, a concurrency, or
neither (then the planner finds each deployment's best operating point under the SLOs).
SLO targets are p90s or p99s (one percentile per question: `SLO.statistic`); the estimator screens
on means and the simulator checks the targets' percentile.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from planner.inputs.edge import ScenarioError
from planner.inputs.scenario import anchored, load_yaml, parse_as
from roofline.catalog.schema import StrictModel
from simulator.config import MAX_RATE, MIN_RATE, ArrivalSpec, SimConfig
from simulator.workload import in_flight_kv, longest_prompt, mean_lengths, trace_rate

MAX_PLAN_GPUS = 4608
Objective = Literal["throughput-per-gpu", "gpus", "cost"]
Mode = Literal["aggregated", "disaggregated"]


SLO_STATISTICS = ("p90", "p99")  # the percentiles a question's targets may bind


class SLO(StrictModel):
    """Latency targets, each named by the percentile it binds (`ttft_p99_ms`: p99 TTFT <= this many ms),
    all at one percentile: p90 (the planner's default) or p99 (MLPerf's Server and Interactive constraints,
    most written SLAs). The simulator checks that percentile; the estimator's screen compares its means."""

    ttft_p90_ms: float | None = Field(default=None, gt=0)
    tpot_p90_ms: float | None = Field(default=None, gt=0)
    e2e_p90_ms: float | None = Field(default=None, gt=0)
    ttft_p99_ms: float | None = Field(default=None, gt=0)
    tpot_p99_ms: float | None = Field(default=None, gt=0)
    e2e_p99_ms: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _one_percentile(self) -> SLO:
        stats = {k.split("_")[1] for k in self.targets()}
        if len(stats) > 1:
            raise ValueError(
                f"targets at one percentile only, p90 or p99 (every target *_p90_ms, or every one *_p99_ms); got "
                f"{', '.join(self.targets())}"
            )
        return self

    def targets(self) -> dict[str, float]:
        return {k: v for k, v in self.model_dump().items() if v is not None}

    @property
    def statistic(self) -> Literal["p90", "p99"]:
        """The percentile the targets bind: p90 or p99 (p90 without targets)."""
        return "p99" if any(target_parts(k)[1] == "p99" for k in self.targets()) else "p90"

    def target(self, name: str) -> float | None:
        """The target of latency `name` (ttft, tpot, e2e) at the SLO's percentile, if one is set."""
        return self.targets().get(f"{name}_{self.statistic}_ms")


def target_parts(key: str) -> tuple[str, str]:
    """An SLO target's latency and percentile: 'tpot_p99_ms' -> ('tpot', 'p99')."""
    name, stat, _ = key.split("_")
    return name, stat


class Question(StrictModel):
    model: str
    hardware: str
    engine: Literal["sglang", "trtllm", "vllm", "other"] = "sglang"
    # exactly this many (at most; spare GPUs idle), or an upper bound; at most 64 NVL72 racks, past
    # which the candidate space (EP up to the budget) and the simulations stop being interactive
    gpus: int | None = Field(default=None, gt=0, le=MAX_PLAN_GPUS)
    max_gpus: int | None = Field(default=None, gt=0, le=MAX_PLAN_GPUS)
    isl: int = Field(default=2000, gt=0)
    osl: int = Field(default=1000, gt=0)
    rate: float | None = Field(default=None, ge=MIN_RATE, le=MAX_RATE)  # requests/s for the whole deployment
    concurrency: int | None = Field(default=None, gt=0)
    slo: SLO = SLO()
    optimize: Objective = "throughput-per-gpu"
    price_per_gpu_hour: float = Field(default=3.0, gt=0)  # USD; shown in the cost column
    modes: list[Mode] = Field(default_factory=lambda: list[Mode](["aggregated", "disaggregated"]))
    mtp: list[bool] = Field(default_factory=lambda: [False, True])
    # None: each pool's own engine default for its layout and role (the unknown-deployment search's,
    # `planner.search.unknowns`, as the scenario is resolved afterwards)
    kv_mem_fractions: list[float | None] = Field(default_factory=lambda: list[float | None]([0.85]))
    verify_top: int = Field(default=3, ge=0, le=8)  # recommendations the simulator must confirm
    simulation: SimConfig | None = None  # traffic details for verification (trace, burstiness)
    # mean KV length in flight; None: isl + osl/2 (`in_flight_kv`); `build_question` sets it from
    # the `simulation:` lengths when they are spread
    kv_len: float | None = Field(default=None, gt=0)
    # the longest prompt; None: isl (`simulator.workload.longest_prompt`); sizes the token budget of an
    # engine that takes prompts only whole, as `with_context_in_flight` sets it from spread lengths
    max_isl: int | None = Field(default=None, gt=0)
    checkpoint: str | None = Field(default=None, min_length=1)  # HF repo id or path the launch commands load

    def in_flight_kv(self) -> float:
        """The mean KV length of the sequences in flight that the estimates price (see
        `simulator.workload.in_flight_kv`): stated, else isl + osl/2."""
        return self.kv_len if self.kv_len is not None else self.isl + self.osl / 2

    def longest_prompt(self) -> int:
        """The longest prompt the pools are launched for (`simulator.workload.longest_prompt`): stated, else isl."""
        return self.max_isl or self.isl

    @model_validator(mode="after")
    def _check(self) -> Question:
        if self.gpus is None and self.max_gpus is None:
            raise ValueError("give gpus (a fixed budget) or max_gpus (an upper bound)")
        if self.gpus is not None and self.max_gpus is not None:
            raise ValueError("give gpus or max_gpus, not both")
        if self.rate is not None and self.concurrency is not None:
            raise ValueError("give rate or concurrency, not both")
        if self.optimize == "gpus" and self.rate is None and self.concurrency is None:
            raise ValueError("optimize: gpus needs a rate or concurrency to serve")
        if any(f is not None and not 0 < f <= 1 for f in self.kv_mem_fractions):
            raise ValueError("kv_mem_fractions must lie in (0, 1]")
        return self

    @property
    def budget(self) -> int:
        return self.gpus or self.max_gpus or 0

    @property
    def traffic_text(self) -> str:
        """The traffic stated, in words ('4 requests/s', '32 requests in flight'); '' when none is."""
        if self.rate is not None:
            return f"{self.rate:,.4g} requests/s"
        return f"{self.concurrency:,} requests in flight" if self.concurrency is not None else ""


DEFAULT_QUESTION = Question(
    model="deepseek-v3",
    hardware="gb200-nvl72",
    max_gpus=72,
    isl=2000,
    osl=1000,
    slo=SLO(ttft_p90_ms=2000, tpot_p90_ms=50),
)
"""`planner plan` with no arguments: DeepSeek-V3 on one GB200 NVL72 rack, 2k/1k tokens, an
interactive SLO (p90 TTFT 2 s, p90 TPOT 50 ms = 20 tok/s per user); best throughput per GPU."""


def build_question(
    given: dict[str, Any] | None = None,
    slo: dict[str, float | None] | None = None,
    base: Question | None = None,
    simulation: Any = None,
) -> Question:
    """The one way the CLI and the app turn what a user typed into a Question: start from `base`
    (a question file) or the documented default question, then apply each field the user gave;
    SLO targets are replaced one by one (`--tpot-p90 30` keeps the default TTFT target); targets at
    another percentile than the base's replace all of its targets (`--tpot-p99 80` on the default
    question leaves p99 TPOT <= 80 ms alone: one percentile per question). A fixed
    budget (`gpus`) replaces an upper bound (`max_gpus`) and vice versa; a rate replaces a
    concurrency and vice versa."""
    start = base or DEFAULT_QUESTION
    data = start.model_dump()
    if start.simulation is not None:  # the section as given: a dump would state all its fields (the
        data["simulation"] = start.simulation  # verifying runs then kept a default request count and step budget)
    fields = {k: v for k, v in (given or {}).items() if v is not None}
    for a, b in (("gpus", "max_gpus"), ("rate", "concurrency")):
        if fields.get(a) is not None:
            data[b] = None
        if fields.get(b) is not None:
            data[a] = None
    data.update(fields)
    targets = {k: v for k, v in (slo or {}).items() if v is not None}
    if targets:
        dropped = replaced_targets(start, slo)
        data["slo"] = {**{k: v for k, v in start.slo.targets().items() if k not in dropped}, **targets}
    if simulation is not None:
        data["simulation"] = simulation
    data = {k: v for k, v in data.items() if v is not None}
    q = parse_question(data)
    if q.simulation is not None and base is None:  # what was not typed: the workload's own traffic
        q = q.model_copy(update=_workload_traffic(q, fields))
    return with_context_in_flight(q)


def replaced_targets(base: Question, slo: dict[str, float | None] | None) -> dict[str, float]:
    """The targets of `base` that typed targets at another percentile replace (`--tpot-p99 80` on the
    default question: its p90 TTFT 2000 ms and TPOT 50 ms); empty where the typed ones merge with them."""
    typed = {target_parts(k)[1] for k, v in (slo or {}).items() if v is not None}
    kept = base.slo.targets()
    return kept if typed and typed != {target_parts(k)[1] for k in kept} else {}


def _workload_traffic(q: Question, typed: dict[str, Any]) -> dict[str, Any]:
    """The lengths and load a `simulation:` section sets, for the fields the user did not type: the
    mean input and output lengths of its draws (a trace's: of the rows it replays), and the rate of its
    arrival process (a closed one's concurrency; a trace replayed at its own times, its mean rate) unless a
    rate or concurrency was typed, so the estimates that rank the candidates
    price the traffic their verifying simulation replays, and a row's scenario reruns as it."""
    assert q.simulation is not None
    isl, osl = mean_lengths(q.simulation, q.isl, q.osl)
    out: dict[str, Any] = {k: v for k, v in (("isl", isl), ("osl", osl)) if k not in typed}
    a = q.simulation.arrival
    if "rate" in typed or "concurrency" in typed:
        _same_traffic(a, typed)
        return out
    if a is not None and a.kind == "closed":
        out.update(concurrency=a.concurrency, rate=None)
    elif a is not None and a.rate is not None:
        out.update(rate=a.rate, concurrency=None)
    elif (replayed := trace_rate(q.simulation)) is not None:  # a trace at its own times: its mean rate
        out.update(rate=min(max(replayed, MIN_RATE), MAX_RATE), concurrency=None)
    return out


def _same_traffic(a: ArrivalSpec | None, typed: dict[str, Any]) -> None:
    """A typed rate or concurrency that the workload's own arrival process contradicts is an error: the
    estimates would price the typed traffic and the verifying simulation replay the workload's (a row
    read batch 4 and 767 tok/s/GPU as an estimate beside 4,198 simulated from 32 clients)."""
    if a is None or a.kind in ("trace", "piecewise"):
        return
    stated = f"simulation.arrival ({a.kind}, " + (
        f"concurrency {a.concurrency})" if a.kind == "closed" else f"rate {a.rate:g}/s)"
    )
    if "concurrency" in typed and (a.kind != "closed" or a.concurrency != typed["concurrency"]):
        raise ScenarioError(
            f"question: concurrency {typed['concurrency']} contradicts the workload's {stated}: give one"
        )
    if "rate" in typed and (a.kind == "closed" or a.rate is None or abs(a.rate - typed["rate"]) > 1e-9 * a.rate):
        raise ScenarioError(f"question: rate {typed['rate']:g} contradicts the workload's {stated}: give one")


def with_context_in_flight(q: Question) -> Question:
    """`q` with `kv_len` and `max_isl` taken from its own `simulation:` lengths
    (`simulator.workload.in_flight_kv`, `longest_prompt`; trace paths read as the simulation reads them)
    unless stated, so the estimates that rank the candidates price the context the verifying simulation
    will hold, on engines launched for its longest prompt. Unchanged for fixed lengths."""
    if q.simulation is None:
        return q
    update: dict[str, float | int] = {}
    kv = in_flight_kv(q.simulation, q.isl, q.osl)
    if q.kv_len is None and kv != q.isl + q.osl / 2:
        update["kv_len"] = kv
    longest = longest_prompt(q.simulation, q.isl, q.osl)
    if q.max_isl is None and longest != q.isl:
        update["max_isl"] = longest
    return q.model_copy(update=update) if update else q


def parse_question(data: object, where: str = "question") -> Question:
    """A question from a mapping; an `slo.statistic` (what `planner plan --json` writes beside the targets, so its
    `question` loads back) must name the targets' percentile."""
    slo = data.get("slo") if isinstance(data, dict) else None
    if isinstance(slo, dict) and "statistic" in slo:
        stat, rest = slo["statistic"], {k: v for k, v in slo.items() if k != "statistic"}
        q = parse_as(Question, {**data, "slo": rest}, where, "question")  # type: ignore[dict-item]
        if stat != q.slo.statistic:
            raise ScenarioError(
                f"{where}: slo.statistic: {stat!r} contradicts the targets' percentile ({q.slo.statistic}); allowed: "
                f"{q.slo.statistic} or leave it out"
            )
        return q
    return parse_as(Question, data, where, "question")


def trace_beside(sim: object, base: Path, where: str) -> SimConfig | None:
    """A raw `simulation:` section from the file at `where`, parsed, its relative trace paths (the
    replayed trace and empirical length traces) read beside that file as a scenario's are (`anchored`;
    from a --workload or --question file they were read from the current folder: 'trace file not found'
    run from elsewhere, sixteenth trial)."""
    if sim is None:
        return None
    return anchored(parse_as(SimConfig, sim, f"{where}: simulation", "simulation"), base)


def load_question(path: str | Path) -> Question:
    data = load_yaml(path)
    if isinstance(data, dict) and "simulation" in data:
        data = {**data, "simulation": trace_beside(data["simulation"], Path(path).parent, str(path))}
    return parse_question(data, str(path))
