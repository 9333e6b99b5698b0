"""Simulation settings: arrival process, length distributions, trace, router and scheduler knobs.

Strict pydantic models validated at the edge (a scenario's `simulation:` section), and again by
`SimConfig.checked()` where the simulator takes a config that may have been copied with updates. They describe
traffic and policies only; deployments come from `roofline.deployment.InstanceSpec`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, ValidationError, model_validator

from roofline.catalog.schema import StrictModel
from roofline.errors import PlannerError

# Upper bounds that keep every input physical and every run bounded (each is far above what the
# shipped examples, anchors and benchmarks use):
MAX_TOKENS = 10_000_000  # tokens in one request: the longest advertised context (Llama 4 Scout) is 10M
MAX_REQUESTS = 200_000  # requests per run: 2x the largest sim_speed benchmark (100k in ~4 s)
MAX_RATE = 1e6  # requests/s
MIN_RATE = 0.01  # requests/s: below one request per 100 s a rate is not a serving load (and rounds to 0 tok/s)
MAX_CONCURRENCY = 10_000_000  # requests in flight
MAX_STEPS = 1_500_000  # default step budget: 22x the 100k-request benchmark's 69,493 steps; 3-10 s here


class InputModel(StrictModel):
    """A strict model for user input: NaN and infinities are refused like any other bad value."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class LengthDist(InputModel):
    """Token-length distribution. `fixed`: value; `uniform`: [min, max]; `normal`: mean, std;
    `lognormal`: mean (of the lengths) and sigma (shape); `eos`: outputs that stop at an end-of-sequence
    token (a client without ignore_eos), mean and max (the request's max_tokens): a constant chance of
    stopping at every token, i.e. geometric lengths cut at max, whose stop chance gives that mean;
    `empirical`: resample a trace column, cut at `max` when given (the request's max_tokens); when
    input and output both resample the same trace, they draw the same rows (`simulator.workload.paired`)."""

    kind: Literal["fixed", "uniform", "normal", "lognormal", "eos", "empirical"]
    value: int | None = Field(default=None, gt=0, le=MAX_TOKENS)
    min: int | None = Field(default=None, gt=0, le=MAX_TOKENS)
    max: int | None = Field(default=None, gt=0, le=MAX_TOKENS)
    mean: float | None = Field(default=None, gt=0, le=MAX_TOKENS)
    std: float | None = Field(default=None, ge=0, le=MAX_TOKENS)
    sigma: float | None = Field(default=None, gt=0, le=3)  # lognormal shape; 3 already spans 1e4x
    trace: str | None = None
    format: Literal["azure", "splitwise", "mooncake", "lengths"] = "splitwise"
    column: Literal["input", "output"] | None = None  # empirical: default is the field it fills

    @model_validator(mode="after")
    def _check(self) -> LengthDist:
        need = {
            "fixed": ("value",),
            "uniform": ("min", "max"),
            "normal": ("mean", "std"),
            "lognormal": ("mean", "sigma"),
            "eos": ("mean", "max"),
            "empirical": ("trace",),
        }[self.kind]
        missing = [n for n in need if getattr(self, n) is None]
        if missing:
            raise ValueError(f"{self.kind} lengths need {', '.join(missing)}")
        if self.kind == "uniform" and self.min and self.max and self.min > self.max:
            raise ValueError("uniform lengths need min <= max")
        if self.kind == "eos" and self.mean and self.max and not 1 <= self.mean <= self.max:
            raise ValueError("eos lengths need 1 <= mean <= max")
        return self


class ArrivalSpec(InputModel):
    """`poisson` (rate), `gamma` (rate and cv: bursty when cv > 1), `constant` (rate), `piecewise`
    (schedule of [start_s, rate] pairs), `closed` (concurrency: a new request when one finishes),
    `trace` (the trace's own timestamps, divided by `time_scale`)."""

    kind: Literal["poisson", "gamma", "constant", "piecewise", "closed", "trace"]
    rate: float | None = Field(default=None, ge=MIN_RATE, le=MAX_RATE)
    cv: float | None = Field(default=None, gt=0, le=100)
    schedule: list[list[float]] | None = Field(default=None, max_length=10_000)  # [[start_s, rate], ...]
    concurrency: int | None = Field(default=None, gt=0, le=MAX_CONCURRENCY)

    @model_validator(mode="after")
    def _check(self) -> ArrivalSpec:
        need = {
            "poisson": ("rate",),
            "gamma": ("rate", "cv"),
            "constant": ("rate",),
            "piecewise": ("schedule",),
            "closed": ("concurrency",),
            "trace": (),
        }[self.kind]
        missing = [n for n in need if getattr(self, n) is None]
        if missing:
            raise ValueError(f"{self.kind} arrivals need {', '.join(missing)}")
        if self.schedule is not None:
            if any(len(pair) != 2 for pair in self.schedule):
                raise ValueError("schedule entries must be [start_s, rate] pairs")
            starts = [s for s, _ in self.schedule]
            if not self.schedule or starts != sorted(starts) or starts[0] != 0 or any(r < 0 for _, r in self.schedule):
                raise ValueError("schedule must start at 0 s, be sorted by time, with non-negative rates")
            if self.schedule[-1][1] < MIN_RATE or any(r > MAX_RATE for _, r in self.schedule):
                raise ValueError(
                    f"schedule: the last rate must be at least {MIN_RATE:g}/s and every rate at most {MAX_RATE:g}/s"
                )
        return self


class TraceSpec(InputModel):
    path: str
    format: Literal["azure", "splitwise", "mooncake", "lengths"]
    time_scale: float = Field(default=1.0, ge=1e-6, le=1e6)  # >1 replays faster


def window_share(wanted: float, other: float) -> float:
    """A warm-up or cool-down share of the requests that leaves room for the other end of the window:
    `wanted`, at most half of what `other` (the stated share of the other end) leaves."""
    return min(wanted, 0.5 * (1 - other))


class SimConfig(InputModel):
    requests: int = Field(default=2000, gt=0, le=MAX_REQUESTS)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    arrival: ArrivalSpec | None = None  # None: closed loop at the workload's concurrency, else Poisson
    input_len: LengthDist | None = None  # None: fixed at the workload's isl
    output_len: LengthDist | None = None
    trace: TraceSpec | None = None
    router: Literal["round_robin", "least_loaded", "kv_aware"] = "least_loaded"
    max_running_requests: int | None = Field(default=None, gt=0, le=MAX_CONCURRENCY)
    prefix_cache_hit_rate: float = Field(default=0.0, ge=0, lt=1)
    prefix_block_tokens: int = Field(default=512, gt=0, le=MAX_TOKENS)  # Mooncake hash_ids cover 512-token blocks
    warmup_fraction: float = Field(default=0.1, ge=0, lt=1)
    # the last arrivals, left out of the measured window: they keep the load on while the measured
    # requests finish, so those do not decode in the drain after arrivals stop (a steady state's run)
    cooldown_fraction: float = Field(default=0.0, ge=0, lt=1)
    closed_loop_ramp_s: float | None = Field(default=None, ge=0, le=1e7)  # clients start spread over this
    # open loop: requests already in flight at 0 s, as a steady state holds them (outputs uniform on
    # [1, drawn output], prompts longer by the tokens left out); warm-up, never measured
    warm_start: int = Field(default=0, ge=0, le=MAX_CONCURRENCY)
    # "completion": measure like a benchmark that drops the first `warmup_fraction` of completions and
    # divides the kept requests' tokens by their span (runtime.engine does); "arrival": a steady window
    warmup_by: Literal["arrival", "completion"] = "arrival"
    ep_imbalance_noise: bool = True  # draw each step's max-rank expert load
    kv_reservation: float = Field(default=1.0, ge=0, le=1)  # share of remaining output reserved at admission
    # forward steps (all instances together) after which the run stops with an error saying so:
    # a run that long is a mis-specified workload (a queue that never drains), not a measurement
    max_steps: int = Field(default=MAX_STEPS, gt=0, le=100_000_000)

    @model_validator(mode="after")
    def _window_left(self) -> SimConfig:
        if self.warmup_fraction + self.cooldown_fraction >= 1:
            raise ValueError("warmup_fraction + cooldown_fraction must be below 1 (they leave no request measured)")
        if self.cooldown_fraction and self.warmup_by == "completion":
            raise ValueError("cooldown_fraction applies to warmup_by: arrival (completion-measured runs count all)")
        return self

    def checked(self) -> SimConfig:
        """This config validated again: `model_copy(update=...)` (e.g. a command-line override of
        `requests` or `seed`) skips validation, and the simulator must never run an invalid one."""
        try:
            return SimConfig.model_validate(self.model_dump())
        except ValidationError as exc:
            why = "; ".join(
                f"simulation.{'.'.join(str(x) for x in e['loc'])}: {e['msg'].lower()} (got {e.get('input')!r})"
                for e in exc.errors()[:3]
            )
            raise SimConfigError(why) from exc


class SimConfigError(PlannerError):
    """Simulation settings that do not validate."""
