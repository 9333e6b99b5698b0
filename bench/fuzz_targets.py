"""Run one fuzz case through the same API paths the `planner` CLI uses (or the CLI itself) and
classify the outcome.

Outcomes: `ok` (accepted, result sane), `rejected` (a PlannerError in one line without internal
class names: the clean exit-2 path), `bad_message` (a PlannerError whose message spans lines or
leaks pydantic class names), `crash` (any other exception, or a CLI traceback), `nonsense` (an
accepted input whose result has NaN, inf, negative or zero throughput, TTFT > E2E, requests
unaccounted for, or invalid JSON), `hang` (past the per-case time limit). A crash's signature is
its exception type and the innermost frame inside this repository. This module runs cases; it
neither draws them (`bench.fuzz_mutate`) nor tabulates them (`bench/fuzz.py`).
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.fuzz_mutate import ROOT, Case
from calibration.fit import read_profile, samples
from planner.inputs.edge import json_text
from planner.inputs.question import load_question
from planner.inputs.scenario import load_scenario
from planner.model.defaults import resolve
from planner.model.estimator import estimate
from planner.model.explain import explain
from planner.model.simulate import run_simulation
from planner.report.plan_report import answer_dict
from planner.report.report import estimate_dict, explanation_dict
from planner.search.plan import plan
from planner.search.validate import results_json, validate_file
from roofline.catalog.hf_import import model_from_hf_file
from roofline.errors import PlannerError
from roofline.params import active_params, kv_bytes_per_token, total_params
from simulator import SimConfig

LEAKS = re.compile(
    r"PoolSpec|DeploymentSpec|WorkloadSpec|MTPSpec|RuntimeSpec|SLOSpec|PrecisionSpec|SimConfig|LengthDist|"
    r"ArrivalSpec|TraceSpec|InstanceSpec|MTPConfig|RuntimeOptions|list\[|literal\[|function-after|pydantic|"
    r"For further information|Traceback"
)


class Nonsense(Exception):
    """An accepted input produced a result that cannot be true."""


class Hang(BaseException):
    """The case ran past its time limit (BaseException: no `except Exception` in the code swallows it)."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def fire(_sig: int, _frame: Any) -> None:
        raise Hang

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def check_numbers(obj: Any, where: str = "") -> None:
    """No NaN, no infinity, no negative number anywhere in a result."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            check_numbers(v, f"{where}.{k}")
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            check_numbers(v, f"{where}[{i}]")
    elif isinstance(obj, float | int) and not isinstance(obj, bool) and (not math.isfinite(obj) or obj < 0):
        raise Nonsense(f"{where.lstrip('.')} = {obj}")


def check_estimate(est: Any, d: dict[str, Any], phase: str) -> None:
    """The rendered dict has no NaN, inf or negative; the Estimate itself (unrounded: the dict's
    fields are rounded to different decimals) has positive throughput and TTFT <= E2E."""
    check_numbers(d)
    if phase != "prefill" and not est.output_tok_s > 0:
        raise Nonsense(f"output_tok_s = {est.output_tok_s}")
    if phase == "prefill" and not est.input_tok_s > 0:
        raise Nonsense(f"input_tok_s = {est.input_tok_s}")
    if est.models("e2e") and est.ttft_s > est.e2e_s * (1 + 1e-12):
        raise Nonsense(f"ttft_s {est.ttft_s} > e2e_s {est.e2e_s}")


def check_summary(m: dict[str, Any], n: int) -> None:
    check_numbers({k: v for k, v in m.items() if k != "notes"})
    if not m["output_tok_s"] > 0:
        raise Nonsense(f"output_tok_s = {m['output_tok_s']}")
    if m["requests_completed"] + m["requests_dropped"] != n:
        raise Nonsense(f"{m['requests_completed']} completed + {m['requests_dropped']} dropped != {n} requests")
    if any("never scheduled" in r for r in m.get("requests_dropped_by_reason", {})):
        raise Nonsense("requests never scheduled")
    ttft, e2e, tpot = m["ttft_ms"]["mean"], m["e2e_ms"]["mean"], m["tpot_ms"]["mean"]
    if ttft is None and tpot is None:  # a phase has no TTFT (decode) or no TPOT and E2E (prefill), not both
        raise Nonsense(f"ttft_ms mean {ttft}, e2e_ms mean {e2e}, tpot_ms mean {tpot}")
    if ttft is not None and e2e is not None and ttft > e2e * (1 + 1e-9) + 1e-9:
        raise Nonsense(f"ttft_ms mean {ttft} vs e2e_ms mean {e2e}")
    w0, w1 = m["measured_window_s"]
    if not w1 > w0:
        raise Nonsense(f"measured window [{w0}, {w1}]")


def _json(obj: Any) -> None:
    json.loads(json_text(obj), parse_constant=lambda c: (_ for _ in ()).throw(Nonsense(f"bare {c} in JSON")))


# ----------------------------------------------------------------------------- targets


def run_scenario(path: Path, action: str) -> None:
    s = load_scenario(path)
    res = resolve(s, path.parent)
    if action == "estimate":
        est = estimate(res)
        d = estimate_dict(est)
        check_estimate(est, d, s.phase)
        _json(d)
    elif action == "explain":
        d = explanation_dict(explain(res))
        check_numbers({k: v for k, v in d.items() if k not in ("levers",)})
        _json(d)
    else:
        result, m = run_simulation(res, s.simulation or SimConfig(), path.parent)
        check_summary(m, len(result.table))
        _json(m)


def run_anchors(path: Path) -> None:
    results, summary = validate_file(path)
    for r in results:
        if r.error is not None:
            if "\n" in r.error or LEAKS.search(r.error):
                raise Nonsense(f"anchor error message: {r.error[:120]}")
            continue
        if r.predicted is None or not math.isfinite(r.predicted) or r.predicted < 0:
            raise Nonsense(f"anchor {r.id}: predicted {r.predicted}")
    _json(results_json(results, summary))


def run_question(path: Path) -> None:
    ans = plan(load_question(path), workers=1)
    _json(answer_dict(ans))


def run_hf(path: Path) -> None:
    m = model_from_hf_file(path)
    for what, v in (("total", total_params(m)), ("active", active_params(m)), ("kv", kv_bytes_per_token(m, "bf16"))):
        if not math.isfinite(v) or v <= 0:
            raise Nonsense(f"{what} params/bytes = {v}")


class ReadCrash(Exception):
    """A read error the project's own reader would raise too (attributed to that reader)."""

    def __init__(self, where: str, exc: Exception) -> None:
        super().__init__(f"{type(exc).__name__}: {exc}")
        self.where, self.kind = where, type(exc).__name__


def run_profile(path: Path) -> None:
    samples(read_profile(path), "h200-sxm")  # exactly as calibration/fit.py fit() reads a profile


def run_cli(case: Case, folder: Path, limit_s: float) -> tuple[str, str, str]:
    cmd = [sys.executable, "-m", "planner.cli", *case.action.split(), str(folder / case.main)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit_s, env=env, cwd=folder, check=False)
    except subprocess.TimeoutExpired:
        return "hang", f"cli {case.action.split()[0]} > {limit_s:g} s", ""
    err = p.stderr.strip()
    if p.returncode == 2:
        if "\n" in err or LEAKS.search(err) or not err.startswith("error:"):
            return "bad_message", "cli exit-2 message: " + ("several lines" if "\n" in err else "leak"), err[:300]
        return "rejected", "", err[:200]
    if p.returncode != 0:
        last = err.splitlines()[-1] if err else f"exit {p.returncode}"
        return "crash", f"cli: {last.split(':')[0]} {_cli_frame(err)}", err[-300:]
    if "--json" in case.action:
        try:
            json.loads(p.stdout, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        except ValueError as exc:
            return "nonsense", "cli --json output is not JSON", str(exc)[:100]
    return "ok", "", ""


def _where(frames: list[tuple[str, str]]) -> str:
    """The innermost frame in this repository (outside bench/), else the innermost of all."""
    root = str(ROOT) + "/"
    mine = [f for f in frames if f[0].startswith(root) and "/bench/" not in f[0]] or frames
    if not mine:
        return "?"
    name, func = mine[-1]
    return f"{name.removeprefix(root)} {func}"


def _cli_frame(err: str) -> str:
    plain = re.findall(r'File "([^"]+)", line \d+, in (\w+)', err)  # a plain traceback
    pretty = re.findall(r"(/[^\s:]+\.py):\d+ in (\w+)", err)  # typer's rich traceback
    return _where(plain or pretty)


def signature(exc: BaseException) -> str:
    if isinstance(exc, ReadCrash):
        return f"{exc.kind} {exc.where}"
    frames = [(f.filename, f.name) for f in traceback.extract_tb(exc.__traceback__)]
    return f"{type(exc).__name__} {_where(frames)}"


def run_case(case: Case, limit_s: float = 20.0) -> tuple[str, str, str]:  # noqa: PLR0911 (one per outcome)
    """(outcome, signature, detail) of one case, run in a fresh temporary folder."""

    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        folder = Path(tmp)
        for name, data in case.files.items():
            (folder / name).write_bytes(data)
        if case.kind == "cli":
            return run_cli(case, folder, limit_s + 10)  # + interpreter start-up
        path = folder / case.main
        target: Callable[[], None] = {
            "scenarios": lambda: run_scenario(path, case.action),
            "traces": lambda: run_scenario(path, "simulate"),
            "anchors": lambda: run_anchors(path),
            "questions": lambda: run_question(path),
            "hf": lambda: run_hf(path),
            "profiles": lambda: run_profile(path),
        }[case.kind]
        try:
            with time_limit(limit_s):
                target()
        except Hang:
            return "hang", f"hang {case.kind} {case.action}", ""
        except Nonsense as exc:
            return "nonsense", f"{case.kind} {case.action}: {str(exc).split(' = ')[0][:60]}", str(exc)[:200]
        except PlannerError as exc:
            msg = str(exc)
            if "\n" in msg or LEAKS.search(msg):
                return "bad_message", f"{type(exc).__name__} message", msg[:300]
            return "rejected", "", msg[:200]
        except RecursionError as exc:
            return "crash", signature(exc), "RecursionError"
        except Exception as exc:
            return "crash", signature(exc), f"{type(exc).__name__}: {str(exc)[:200]}"
    return "ok", "", ""
