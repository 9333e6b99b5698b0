"""Requests to simulate: arrival times (or a closed-loop concurrency) and token lengths.

Everything is drawn from one seeded `numpy.random.Generator`, so the same seed gives the same
requests. Traces come from `simulator.traces`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simulator.config import MAX_TOKENS, ArrivalSpec, LengthDist, SimConfig
from simulator.traces import Trace, read_trace


@dataclass(slots=True)
class Workload:
    arrival_s: np.ndarray | None  # None: closed loop
    concurrency: int  # closed loop only
    isl: np.ndarray
    osl: np.ndarray
    hash_ids: list[list[int]] | None = None
    notes: list[str] = field(default_factory=list)  # e.g. malformed trace rows that were skipped
    warm: int = 0  # the first `warm` requests are a warm start (in flight at 0 s, never measured)

    def __len__(self) -> int:
        return len(self.isl)


SKIPPED_SHOWN = 5  # malformed rows a note names (the first, then the next four)


def skipped_note(t: Trace) -> list[str]:
    """What a trace's reader left out or changed: its malformed rows (the first few named, not only the first)
    and how many rows it replayed out of file order."""
    out = []
    if t.skipped:
        more = f"; {len(t.skipped) - SKIPPED_SHOWN:,} more" if len(t.skipped) > SKIPPED_SHOWN else ""
        out.append(f"trace: skipped {len(t.skipped)} malformed row(s): {'; '.join(t.skipped[:SKIPPED_SHOWN])}{more}")
    if t.reordered:
        out.append(f"trace: {t.reordered:,} row(s) arrive before the row above them: replayed in time order")
    return out


def _at(path: str, base: Path | None) -> Path:
    """A trace path as given, or relative to `base` (the scenario's folder) when it is relative."""
    p = Path(path)
    return p if base is None or p.is_absolute() else base / p


def sample_lengths(
    d: LengthDist,
    n: int,
    rng: np.random.Generator,
    base: Path | None = None,
    which: str = "input",
    notes: list[str] | None = None,
) -> np.ndarray:
    """`n` lengths drawn from `d`, clipped to [1, MAX_TOKENS]; trace notes go to `notes`."""
    notes = [] if notes is None else notes
    if d.kind == "fixed":
        assert d.value is not None
        out = np.full(n, d.value, dtype=float)
    elif d.kind == "uniform":
        assert d.min is not None
        assert d.max is not None
        out = rng.integers(d.min, d.max + 1, size=n).astype(float)
    elif d.kind == "normal":
        assert d.mean is not None
        assert d.std is not None
        out = rng.normal(d.mean, d.std, size=n)
    elif d.kind == "lognormal":
        assert d.mean is not None
        assert d.sigma is not None
        out = rng.lognormal(np.log(d.mean) - d.sigma**2 / 2, d.sigma, size=n)
    elif d.kind == "eos":
        assert d.mean is not None
        assert d.max is not None
        stop = eos_stop_chance(d.mean, d.max)
        out = (
            np.full(n, d.max, dtype=float)
            if stop == 0.0
            else np.minimum(rng.geometric(stop, size=n), d.max).astype(float)
        )
    else:
        assert d.trace is not None
        t = read_trace(_at(d.trace, base), d.format)
        notes.extend(skipped_note(t))
        column = t.isl if (d.column or which) == "input" else t.osl
        out = rng.choice(column, size=n).astype(float)
        if d.max is not None:  # the request's max_tokens cuts a recorded output
            out = np.minimum(out, d.max)
    return np.clip(np.rint(out), 1, MAX_TOKENS).astype(np.int64)  # a long tail stays a length


def paired(cfg: SimConfig) -> bool:
    """Whether input and output lengths resample the same rows of one trace (both `empirical` on the
    same file and format, each reading its own column): a sample's input and output stay together."""
    i, o = cfg.input_len, cfg.output_len
    return (
        i is not None
        and o is not None
        and i.kind == o.kind == "empirical"
        and (i.trace, i.format) == (o.trace, o.format)
        and (i.column or "input") == "input"
        and (o.column or "output") == "output"
    )


def sample_pairs(
    cfg: SimConfig, n: int, rng: np.random.Generator, base: Path | None, notes: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """`n` (input, output) rows drawn together from the trace both lengths resample (`paired`), each
    cut at its own `max` when given."""
    i, o = cfg.input_len, cfg.output_len
    assert i is not None
    assert o is not None
    assert i.trace is not None
    t = read_trace(_at(i.trace, base), i.format)
    notes.extend(skipped_note(t))
    rows = rng.integers(0, len(t), size=n)
    isls, osls = t.isl[rows].astype(float), t.osl[rows].astype(float)
    isls = np.minimum(isls, i.max) if i.max is not None else isls
    osls = np.minimum(osls, o.max) if o.max is not None else osls
    return np.clip(isls, 1, MAX_TOKENS).astype(np.int64), np.clip(osls, 1, MAX_TOKENS).astype(np.int64)


KV_DRAWS = 65_536  # length draws behind `in_flight_kv` (its sampling error is well under 1%)


def _draws(cfg: SimConfig | None, isl: int, osl: int, base: Path | None) -> tuple[np.ndarray, np.ndarray] | None:
    """`KV_DRAWS` of `cfg`'s own (input, output) lengths (its seed; a `simulation.trace` gives its
    rows); None when the lengths are fixed at isl and osl."""
    if cfg is None or (cfg.input_len is None and cfg.output_len is None and cfg.trace is None):
        return None
    if cfg.trace is not None:  # the rows a run replays (`build_workload`: the first `requests`)
        t = read_trace(_at(cfg.trace.path, base), cfg.trace.format)
        return t.isl[: cfg.requests], t.osl[: cfg.requests]
    return draw_lengths(cfg, KV_DRAWS, isl, osl, np.random.default_rng(cfg.seed), base, [])


def in_flight_kv(cfg: SimConfig | None, isl: int, osl: int, base: Path | None = None) -> float:
    """Mean KV length of the sequences in flight in steady state. A sequence of input I and output L
    is in flight for its L decode steps at contexts I..I+L, so the time average weights each by its
    length: sum L (I + L/2) / sum L. Fixed lengths give isl + osl/2; spread outputs give more (long
    outputs stay in flight longer: with DeepSeek-R1's MLPerf outputs, cv 1.25, about 1.8x). The draws
    are `cfg`'s own lengths (its seed; a `simulation.trace` replays its rows), `KV_DRAWS` of them."""
    drawn = _draws(cfg, isl, osl, base)
    if drawn is None:
        return isl + osl / 2
    i, o = drawn[0].astype(float), drawn[1].astype(float)
    return float(np.sum(o * (i + o / 2)) / np.sum(o))


def trace_rate(cfg: SimConfig, base: Path | None = None) -> float | None:
    """The mean arrival rate (req/s) of the trace rows a run replays at their own times (the first
    `requests`, divided by `time_scale`); None without a trace, or under a stated arrival process."""
    if cfg.trace is None or (cfg.arrival is not None and cfg.arrival.kind != "trace"):
        return None
    t = read_trace(_at(cfg.trace.path, base), cfg.trace.format)
    arr = np.sort(t.arrival_s[: cfg.requests]) / cfg.trace.time_scale
    span = float(arr[-1] - arr[0]) if len(arr) > 1 else 0.0
    return (len(arr) - 1) / span if span > 0 else None


def mean_lengths(cfg: SimConfig | None, isl: int, osl: int, base: Path | None = None) -> tuple[int, int]:
    """The mean input and output lengths of `cfg`'s own draws (or its trace's rows), rounded; isl and
    osl when the lengths are fixed."""
    drawn = _draws(cfg, isl, osl, base)
    return (
        (isl, osl) if drawn is None else (max(1, round(float(drawn[0].mean()))), max(1, round(float(drawn[1].mean()))))
    )


def longest_prompt(cfg: SimConfig | None, isl: int, osl: int, base: Path | None = None) -> int:
    """The longest prompt the workload sends: the longest of `cfg`'s `KV_DRAWS` input draws (or of its
    trace's rows), isl when the lengths are fixed. An engine that schedules prompts only whole must be
    launched with room for it (`planner.engines.runtime_options`), as trtllm-bench sizes its token
    budget from the dataset's longest input (max_isl), not its mean."""
    drawn = _draws(cfg, isl, osl, base)
    return isl if drawn is None else max(isl, int(drawn[0].max()))


def eos_stop_chance(mean: float, cap: int) -> float:
    """The per-token chance p of stopping at EOS for which min(Geometric(p), cap) has this mean:
    E[min(G, M)] = sum_{k<M} (1 - p)^k = (1 - (1 - p)^M) / p, which falls from M (p -> 0) to 1 (p = 1).
    A constant stop chance is the one-parameter (maximum-entropy) law of a length with a known mean;
    0 when the mean is the cap (every output runs to max_tokens)."""
    if mean >= cap:
        return 0.0
    if mean <= 1:
        return 1.0
    from scipy.optimize import brentq  # noqa: PLC0415  (here, not at import: 0.45 s of every CLI start)

    return float(brentq(lambda p: (1 - (1 - p) ** cap) / p - mean, 1e-12, 1.0, xtol=1e-15))


def arrival_times(a: ArrivalSpec, n: int, rng: np.random.Generator) -> np.ndarray:
    if a.kind == "poisson":
        assert a.rate
        gaps = rng.exponential(1 / a.rate, size=n)
    elif a.kind == "gamma":
        assert a.rate
        assert a.cv
        shape = 1 / a.cv**2
        gaps = rng.gamma(shape, 1 / (a.rate * shape), size=n)
    elif a.kind == "constant":
        assert a.rate
        gaps = np.full(n, 1 / a.rate)
    elif a.kind == "piecewise":
        return _piecewise(a.schedule or [], n, rng)
    else:
        raise ValueError(f"arrival kind {a.kind} has no generated times")
    t = np.cumsum(gaps)
    return t - t[0]


def _piecewise(schedule: list[list[float]], n: int, rng: np.random.Generator) -> np.ndarray:
    """Non-homogeneous Poisson arrivals: exponential gaps in cumulative-rate time, mapped back."""
    starts = np.array([s for s, _ in schedule], dtype=float)
    rates = np.array([r for _, r in schedule], dtype=float)
    if rates[-1] <= 0:
        raise ValueError("piecewise schedule: the last segment's rate must be positive")
    cum = np.concatenate([[0.0], np.cumsum(np.diff(starts) * rates[:-1])])  # expected arrivals at starts
    targets = np.cumsum(rng.exponential(1.0, size=n))
    seg = np.searchsorted(cum, targets, side="right") - 1
    while True:  # skip zero-rate segments
        zero = rates[seg] <= 0
        if not zero.any():
            break
        seg[zero] += 1
    t = starts[seg] + (targets - cum[seg]) / rates[seg]
    return t - t[0]


def draw_lengths(
    cfg: SimConfig, n: int, isl: int, osl: int, rng: np.random.Generator, base: Path | None, notes: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """`n` input and output lengths from `cfg`'s distributions (fixed at isl/osl where it has none)."""
    if paired(cfg):
        return sample_pairs(cfg, n, rng, base, notes)
    isls = sample_lengths(cfg.input_len, n, rng, base, "input", notes) if cfg.input_len else np.full(n, isl)
    osls = sample_lengths(cfg.output_len, n, rng, base, "output", notes) if cfg.output_len else np.full(n, osl)
    return isls, osls


def build_workload(
    cfg: SimConfig, isl: int, osl: int, concurrency: float | None, rate: float | None, base: Path | None = None
) -> Workload:
    cfg = cfg.checked()
    rng = np.random.default_rng(cfg.seed)
    if cfg.trace is not None:
        trace = read_trace(_at(cfg.trace.path, base), cfg.trace.format)
        n = min(cfg.requests, len(trace))
        arr: np.ndarray | None = trace.arrival_s[:n] / cfg.trace.time_scale
        isls, osls = trace.isl[:n].copy(), trace.osl[:n].copy()
        hashes = trace.hash_ids[:n] if trace.hash_ids is not None else None
        if cfg.arrival is not None and cfg.arrival.kind != "trace":
            arr = _arrivals(cfg.arrival, n, rng)
        conc = cfg.arrival.concurrency if cfg.arrival and cfg.arrival.kind == "closed" else 0
        return Workload(None if conc else arr, conc or 0, isls, osls, hashes, skipped_note(trace))
    n = cfg.requests
    notes: list[str] = []
    isls, osls = draw_lengths(cfg, n, isl, osl, rng, base, notes)
    spec = cfg.arrival
    if spec is None:
        if rate:
            spec = ArrivalSpec(kind="poisson", rate=rate)
        else:
            spec = ArrivalSpec(kind="closed", concurrency=max(1, round(concurrency or 1)))
    if spec.kind == "trace":
        raise ValueError("simulation.arrival: kind `trace` needs simulation.trace")
    if spec.kind == "closed":
        assert spec.concurrency
        return Workload(None, spec.concurrency, isls, osls, None, notes)
    wl = Workload(_arrivals(spec, n, rng), 0, isls, osls, None, notes)
    return _warm_start(wl, cfg, isl, osl, base) if cfg.warm_start else wl


def _warm_start(wl: Workload, cfg: SimConfig, isl: int, osl: int, base: Path | None) -> Workload:
    """`cfg.warm_start` requests in flight at 0 s ahead of `wl`'s arrivals: a steady state's population,
    each partway through its output. A request of drawn lengths (i, o) seen at a uniform point of its
    decode has r in [1, o] tokens left and a context of i + o - r, so it arrives with that prompt and
    r tokens to generate, its KV already computed (`Context.cached_tokens`): the batch starts at its
    steady size, with steady contexts, and leaves at a steady pace instead of growing from empty (near
    capacity that growth relaxes over many E2Es). Own
    random stream, so the other requests are those of a cold start."""
    rng = np.random.default_rng([cfg.seed, 7])
    wi, wo = draw_lengths(cfg, cfg.warm_start, isl, osl, rng, base, [])
    left = rng.integers(1, np.maximum(wo, 1) + 1).astype(float)
    prompt = np.minimum(wi + wo - left, MAX_TOKENS)
    assert wl.arrival_s is not None
    return Workload(
        np.concatenate([np.zeros(cfg.warm_start), wl.arrival_s]),
        0,
        np.concatenate([prompt, wl.isl]),
        np.concatenate([left, wl.osl]),
        None,
        wl.notes,
        cfg.warm_start,
    )


def _arrivals(spec: ArrivalSpec, n: int, rng: np.random.Generator) -> np.ndarray | None:
    return None if spec.kind == "closed" else arrival_times(spec, n, rng)
