"""Fit a measured profile into the efficiencies the step-cost model uses.

For every measured point, efficiency eta = ideal / measured, where ideal = max(FLOPs / peak,
bytes / bandwidth) on the profiled GPU: pure roofline, no fixed costs, so small kernels show low
eta. Per op family (and format), log eta is fitted as a smooth function of log2 FLOPs and log2
bytes per kernel call (a thin-plate radial basis function with light smoothing, so measured
points are reproduced and shapes between them interpolate), then tabulated on a grid that
`roofline.calibrated` reads with a bilinear lookup. Error is cross-validated (5-fold over
shapes) and reported per family.

The kernel actually timed for each family is the one `runtime.registry` chooses on sm_90; for
FP8 dense GEMMs that is per-tensor scales up to 128 tokens and block scales from 256.
Decode-sized GEMMs (M <= 256) are taken from `runtime.warm_gemm` where it measured them: back to
back in one graph with warm activations, as a decode step runs them, not alone after an L2 flush.
`python -m calibration.fit` rewrites roofline/calibrated/<hardware>.json from the committed profiles.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.interpolate import RBFInterpolator

from roofline.calibrated import gqa_decode_bytes, mla_decode_bytes, mla_prefill_bytes
from roofline.catalog import get_hardware
from roofline.errors import PlannerError
from roofline.precision import RateKey, peak_flops

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "calibration" / "data" / "h200-sxm-profile.json"
WARM = ROOT / "calibration" / "data" / "h200-sxm-warm-gemm.json"  # runtime.warm_gemm: decode GEMMs back to back
# Families swept later, each file with its own provenance (`python -m runtime.sweep --ops gqa_decode`)
ADDED = (ROOT / "calibration" / "data" / "h200-sxm-gqa-decode.json",)
OUT_DIR = ROOT / "roofline" / "calibrated"
CKV, KPE, QK, VD = 512, 64, 192, 128  # DeepSeek-V3 MLA, the shapes runtime.ops.attention measures
GRID = 28  # grid points per axis of the tabulated log-efficiency
SMOOTHING = 0.05


ROWS = {
    "gemm": "m",
    "moe_gemm": "tokens",
    "mla_decode": "batch",
    "gqa_decode": "batch",
    "attn_prefill": "new",
    "elementwise": "tokens",
}


@dataclass(frozen=True, slots=True)
class Sample:
    log_flops: float
    log_bytes: float
    log_rows: float  # rows per call: GEMM M, tokens per expert, decode batch, prefill tokens
    log_eta: float
    measured_s: float
    ideal_s: float


def family_key(point: dict[str, Any]) -> str | None:
    """The step-model family a measured point calibrates, or None if it is not the registry's
    choice (e.g. FP8 per-tensor GEMMs at prefill sizes, where block scales are used)."""
    fam, fmt, params = point["family"], point["fmt"], point["params"]
    if fam == "gemm" and fmt == "fp8":
        block = params.get("scaling") == "block"
        if block != (params["m"] >= 256):
            return None
    return f"{fam}/{fmt}"


def point_bytes(p: dict[str, Any]) -> float:
    """Bytes of a measured point, counted as the step model counts them when it looks the table up
    (roofline.calibrated's attention counts; profiles written before they were shared counted the
    query and output traffic too, so attention points are recounted from their shapes)."""
    fam, q = p["family"], p["params"]
    if fam == "mla_decode":
        return mla_decode_bytes(q["batch"] * q["ctx"], CKV, KPE, 1 if p["fmt"] == "fp8" else 2)
    if fam == "gqa_decode":
        return gqa_decode_bytes(q["batch"] * q["ctx"], q["kv_heads"], q["head_dim"], 1 if p["fmt"] == "fp8" else 2)
    if fam == "attn_prefill":
        return mla_prefill_bytes(q["batch"] * q["new"], q["batch"] * q["prefix"], q["heads"], QK, VD)
    return float(p["bytes"])


MAX_SHAPE = 1e9  # no measured op has a dimension past this


class ProfileError(PlannerError):
    """A calibration profile that cannot be read (one line naming the file or the entry)."""


def _point_problem(p: Any) -> str | None:
    """Why a profile entry cannot be used, or None."""
    if not isinstance(p, dict):
        return "not a mapping"
    fam = p.get("family")
    if (
        not isinstance(fam, str)
        or fam not in ROWS
        or not isinstance(p.get("fmt"), str)
        or not isinstance(p.get("params"), dict)
    ):
        return f"family must be one of {', '.join(ROWS)}, with a fmt and params"
    for k, v in p["params"].items():  # shapes are numbers (a string batch would be repeated, not multiplied)
        if k == "scaling":
            if not isinstance(v, str):
                return f"params.scaling must be text (got {v!r})"
            continue
        number = isinstance(v, int | float) and not isinstance(v, bool)
        if not number or not (-MAX_SHAPE <= v <= MAX_SHAPE):  # a hostile 10**400 must not reach the byte counts
            return f"params.{k} must be a number of at most {MAX_SHAPE:g} (got {str(v)[:40]})"
    for name in ("flops", "median_ms"):
        v = p.get(name)
        if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
            return f"{name} must be a finite non-negative number (got {v!r})"
    return None if p["median_ms"] > 0 else "median_ms must be positive"


def samples(profile: Any, hardware: str, skipped: list[str] | None = None) -> dict[str, list[Sample]]:
    """Samples by family; an entry that cannot be used is skipped and named in `skipped`."""
    if not isinstance(profile, dict) or not isinstance(profile.get("points"), list):
        raise ProfileError("profile: expected a mapping with a `points` list")
    hw = get_hardware(hardware)
    out: dict[str, list[Sample]] = {}
    notes = skipped if skipped is not None else []
    for k, p in enumerate(profile["points"]):
        why = _point_problem(p)
        try:
            sample = None if why else _sample(p, hw)
        except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError) as exc:
            why = f"{type(exc).__name__}: {exc}"
            sample = None
        if why:
            notes.append(f"points[{k}]: {why}")
        elif sample is not None:
            out.setdefault(sample[0], []).append(sample[1])
    return out


def _sample(p: dict[str, Any], hw: Any) -> tuple[str, Sample] | None:
    key = family_key(p)
    if key is None:
        return None
    rate: RateKey = "fp8" if p["fmt"] == "fp8" and p["family"] in ("gemm", "moe_gemm") else "bf16"
    nbytes = point_bytes(p)
    ideal = max(p["flops"] / peak_flops(hw, rate), nbytes / hw.mem_bw)
    t = p["median_ms"] * 1e-3
    rows = p["params"][ROWS[p["family"]]] * (p["params"].get("batch", 1) if p["family"] == "attn_prefill" else 1)
    logs = (math.log2(max(p["flops"], 1.0)), math.log2(nbytes), math.log2(rows), math.log(ideal / t))
    return key, Sample(*logs, t, ideal)


class _Model:
    """Thin-plate RBF in (log2 FLOPs, log2 bytes[, log2 rows]); axes that add no information
    (elementwise ops have no FLOPs) are dropped."""

    def __init__(self, train: list[Sample], use_rows: bool = True) -> None:
        x = np.array([[s.log_flops, s.log_bytes, s.log_rows] for s in train])
        self.cols: list[int] = []
        for c in (1, 0, 2) if use_rows else (1, 0):  # bytes first, then what adds information
            trial = np.column_stack([np.ones(len(x)), x[:, [*self.cols, c]]])
            if np.linalg.matrix_rank(trial, tol=1e-6) == len(self.cols) + 2:
                self.cols.append(c)
        y = np.array([s.log_eta for s in train])
        self.rbf = RBFInterpolator(x[:, self.cols], y, kernel="thin_plate_spline", smoothing=SMOOTHING, degree=1)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self.rbf(x[:, self.cols]))


def _rbf(train: list[Sample], use_rows: bool = True) -> _Model:
    return _Model(train, use_rows)


def held_out_errors(data: list[Sample], use_rows: bool = True, folds: int = 5, seed: int = 0) -> list[float]:
    """|predicted/measured - 1| of every point, predicted by a model fitted without its fold."""
    idx = np.random.default_rng(seed).permutation(len(data))
    errs: list[float] = []
    for f in range(folds):
        test = set(idx[f::folds].tolist())
        train = [d for i, d in enumerate(data) if i not in test]
        if len(train) < 4:
            continue
        model = _rbf(train, use_rows)
        for i in test:
            s = data[i]
            eta = math.exp(float(model(np.array([[s.log_flops, s.log_bytes, s.log_rows]]))[0]))
            errs.append(abs(s.ideal_s / eta / s.measured_s - 1))
    return errs


def cross_validate(data: list[Sample], use_rows: bool = True) -> float:
    errs = held_out_errors(data, use_rows)
    return float(np.median(errs)) if errs else math.nan


def _axis(v: list[float], n: int) -> np.ndarray:
    return np.linspace(min(v), max(v) + (1.0 if max(v) == min(v) else 0.0), n)


def tabulate(data: list[Sample], use_rows: bool) -> dict[str, Any]:
    """Log efficiency on a (FLOPs, bytes, rows) grid; the rows axis has one point when unused."""
    model = _rbf(data, use_rows)
    f_axis = _axis([s.log_flops for s in data], GRID)
    b_axis = _axis([s.log_bytes for s in data], GRID)
    r_axis = _axis([s.log_rows for s in data], 8) if use_rows and 2 in model.cols else np.array([0.0])
    ff, bb, rr = np.meshgrid(f_axis, b_axis, r_axis, indexing="ij")
    grid = model(np.column_stack([ff.ravel(), bb.ravel(), rr.ravel()])).reshape(len(f_axis), len(b_axis), len(r_axis))
    lo, hi = min(s.log_eta for s in data), max(s.log_eta for s in data)
    grid = np.clip(grid, lo, min(hi, 0.0))  # never faster than the roofline, nor past what was seen
    return {
        "log2_flops": [round(float(v), 4) for v in f_axis],
        "log2_bytes": [round(float(v), 4) for v in b_axis],
        "log2_rows": [round(float(v), 4) for v in r_axis],
        "log_eta": np.round(grid, 5).tolist(),
    }


def with_back_to_back(profile: dict[str, Any], warm: dict[str, Any]) -> dict[str, Any]:
    """The profile with each point that `runtime.warm_gemm` also measured (same key: op, format,
    shape) timed as the engine runs it (back to back, warm L2) instead of alone after an L2 flush;
    points it did not measure, and points it adds, are kept as they are."""
    by_key = {p["key"]: p for p in warm["points"]}
    points = [by_key.pop(p["key"], p) for p in profile["points"]] + list(by_key.values())
    return {**profile, "points": points, "back_to_back": warm["provenance"]}


def read_profile(path: Path) -> Any:
    """A profile file as JSON; a file that is not UTF-8 JSON is one ProfileError."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ProfileError(f"{path}: not a readable JSON profile ({type(exc).__name__})") from exc


def with_added(profile: dict[str, Any], paths: tuple[Path, ...]) -> dict[str, Any]:
    """The profile with the points of later sweeps of other families appended; each added file's
    provenance is kept under `added` (path -> provenance)."""
    added: dict[str, Any] = {}
    points = list(profile["points"])
    for path in paths:
        extra = read_profile(path)
        if not isinstance(extra, dict) or not isinstance(extra.get("points"), list):
            raise ProfileError(f"{path}: expected a mapping with a `points` list")
        points += extra["points"]
        added[str(path.relative_to(ROOT))] = extra.get("provenance")
    return {**profile, "points": points, "added": added}


def fit(
    profile_path: Path = PROFILE,
    hardware: str = "h200-sxm",
    warm_path: Path | None = WARM,
    added: tuple[Path, ...] = ADDED,
) -> dict[str, Any]:
    profile = read_profile(profile_path)
    if warm_path is not None and warm_path.is_file():
        profile = with_back_to_back(profile, read_profile(warm_path))
    profile = with_added(profile, tuple(p for p in added if p.is_file()))
    fams = {}
    pooled: list[float] = []
    skipped: list[str] = []
    for key, data in sorted(samples(profile, hardware, skipped).items()):
        # the feature set is chosen by held-out error: rows per call helps where FLOPs and bytes
        # alone confuse shapes, and overfits families with few points
        use_rows = cross_validate(data, True) <= cross_validate(data, False)
        errs = held_out_errors(data, use_rows)
        pooled += errs
        fams[key] = {
            "points": len(data),
            "rows_feature": use_rows,
            "cv_median_abs_err": round(float(np.median(errs)), 4),
            "eta_range": [
                round(math.exp(min(s.log_eta for s in data)), 4),
                round(math.exp(max(s.log_eta for s in data)), 4),
            ],
            **tabulate(data, use_rows),
        }
    return {
        "version": 1,
        "hardware": hardware,
        "profile": str(profile_path.relative_to(ROOT)),
        "provenance": profile["provenance"],
        "back_to_back": profile.get("back_to_back"),
        "added": profile.get("added"),
        "cv_median_abs_err": round(float(np.median(pooled)), 4),
        "families": fams,
        **({"skipped": skipped} if skipped else {}),
    }


def main() -> None:
    result = fit()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    out = OUT_DIR / f"{result['hardware']}.json"
    out.write_text(json.dumps(result, indent=None, separators=(",", ":")))
    print("| family | points | features | cross-validated median abs error | efficiency range |")
    print("|---|---:|---|---:|---|")
    for key, fam in result["families"].items():
        lo, hi = fam["eta_range"]
        feats = "FLOPs, bytes, rows" if fam["rows_feature"] else "FLOPs, bytes"
        print(f"| {key} | {fam['points']} | {feats} | {fam['cv_median_abs_err']:.1%} | {lo:.2f} - {hi:.2f} |")
    print(f"all held-out points: median abs error {result['cv_median_abs_err']:.1%}")
    print(f"saved {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
