"""Reads the settings an MLPerf submission built on NVIDIA's harness publishes: its config files
(closed/<submitter>/configs/<system>/<scenario>/<benchmark>.py) and the LoadGen test parameters of
its log (mlperf_log_summary.txt). Used by bench/mlperf_configs.py; it writes nothing.

A config is Python that assigns dicts keyed by field objects (`model_fields.gpu_batch_size: {...}`)
and maps `EXPORTS[WorkloadSetting(HarnessType.Custom, AccuracyTarget(0.99), PowerSetting.MaxP)]` to
the dict the harness runs. It is read with `ast`, never executed: literals, lists, dicts, `+ - *` of
numbers, names assigned earlier in the file, `{**a, ...}`, `a | {...}`, `dict(a, **b)` and
`copy.deepcopy(a)`; a field key reads as its attribute name (`gpu_batch_size`). A dict value it
cannot follow (e.g. a comprehension listing CUDA-graph sizes) is kept as `Unread` with its source text,
and `setting` refuses to return one, so a value this reader cannot follow is never half read.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path
from typing import Any

# The submission the harness runs: closed division, performance, 99% accuracy target, no power cap.
EXPORT_KEY = ("Custom", 0.99, "MaxP")


class ConfigError(ValueError):
    pass


class Unread(str):
    """The source text of a config value this reader does not evaluate."""


def git_show(repo: Path, commit: str, path: str) -> str | None:
    cmd = ["git", "-C", str(repo), "show", f"{commit}:{path}"]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return r.stdout if r.returncode == 0 else None


def _merge(a: Any, b: Any) -> Any:
    """The harness's deep merge of override dicts (later keys win, nested dicts merged)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = _merge(out[k], v) if k in out else v
        return out
    return b


class _Reader:
    def __init__(self, name: str) -> None:
        self.name = name
        self.env: dict[str, Any] = {}

    def fail(self, node: ast.AST, what: str) -> ConfigError:
        return ConfigError(f"{self.name}:{getattr(node, 'lineno', '?')}: {what} ({ast.unparse(node)[:80]})")

    def value(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant | ast.Attribute):  # llm_fields.x -> 'x'; C.PowerSetting.MaxP -> 'MaxP'
            return node.value if isinstance(node, ast.Constant) else node.attr
        if isinstance(node, ast.Name):
            if node.id not in self.env:
                raise self.fail(node, "name not assigned earlier")
            return self.env[node.id]
        if isinstance(node, ast.List | ast.Tuple):
            return [self.value(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            return self.mapping(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        return self.arithmetic(node)

    def arithmetic(self, node: ast.AST) -> Any:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self.value(node.operand)
        if isinstance(node, ast.BinOp):
            a, b = self.value(node.left), self.value(node.right)
            if isinstance(node.op, ast.BitOr) and isinstance(a, dict):
                return {**a, **b}
            ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b}
            if type(node.op) in ops and all(isinstance(x, int | float) for x in (a, b)):
                return ops[type(node.op)]()
        raise self.fail(node, "expression this reader does not follow")

    def mapping(self, node: ast.Dict) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:  # {**other}
                out.update(self.value(v))
                continue
            key = self.value(k)
            try:
                val = self.value(v)
            except ConfigError:
                val = Unread(ast.unparse(v))
            out[tuple(key) if isinstance(key, list) else key] = val
        return out

    def call(self, node: ast.Call) -> Any:
        fn = ast.unparse(node.func)
        args = [self.value(a) for a in node.args]
        if fn in ("copy.deepcopy", "deepcopy", "dict") and len(args) <= 1:
            out = dict(args[0]) if args else {}
            for kw in node.keywords:
                if kw.arg is None:
                    out.update(self.value(kw.value))
                else:
                    out[kw.arg] = self.value(kw.value)
            return out
        if fn.endswith("WorkloadSetting"):
            return tuple(args)
        if fn.endswith(("AccuracyTarget", "HarnessType", "PowerSetting")):
            return args[0] if args else None
        if fn in ("merge", "deep_merge", "_merge") and len(args) == 2:
            return _merge(args[0], args[1])
        raise self.fail(node, "call this reader does not follow")

    def statement(self, st: ast.stmt) -> None:
        if isinstance(st, ast.Import | ast.ImportFrom | ast.Expr | ast.Pass):
            return
        if isinstance(st, ast.Assign):
            for t in st.targets:
                if isinstance(t, ast.Name):
                    self.env[t.id] = self.value(st.value)
                elif isinstance(t, ast.Subscript) and ast.unparse(t.value) == "os.environ":
                    continue  # environment variables of the run: not engine settings read here
                elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in self.env:
                    self.env[t.value.id][self.value(t.slice)] = self.value(st.value)
                else:
                    raise self.fail(st, "assignment target this reader does not follow")
            return
        if isinstance(st, ast.Expr | ast.If | ast.FunctionDef):
            return
        raise self.fail(st, "statement this reader does not follow")


def read_config(text: str, name: str) -> dict[str, Any]:
    """The settings dict the harness runs for EXPORT_KEY."""
    r = _Reader(name)
    for st in ast.parse(text).body:
        r.statement(st)
    exports = r.env.get("EXPORTS")
    if not isinstance(exports, dict):
        raise ConfigError(f"{name}: no EXPORTS dict")
    for key, cfg in exports.items():
        if tuple(key)[:3] == EXPORT_KEY:
            return dict(cfg)
    raise ConfigError(f"{name}: EXPORTS has no {EXPORT_KEY} entry ({list(exports)})")


def setting(cfg: dict[str, Any], *path: str) -> Any:
    """cfg[path[0]][path[1]]..., None where a key is absent; an `Unread` value is an error."""
    v: Any = cfg
    for key in path:
        if not isinstance(v, dict) or key not in v:
            return None
        v = v[key]
    if isinstance(v, Unread):
        raise ConfigError(f"{'.'.join(path)}: value not read ({v})")
    return v


LOG_PARAMS = {
    "target_qps": r"^target_qps : ([0-9.e+]+)$",
    "min_duration_ms": r"^min_duration \(ms\): (\d+)$",
    "min_query_count": r"^min_query_count : (\d+)$",
    "ttft_latency_ns": r"^ttft_latency \(ns\): (\d+)$",
    "tpot_latency_ns": r"^tpot_latency \(ns\): (\d+)$",
}


def read_log_params(text: str) -> dict[str, float]:
    """LoadGen's 'Test Parameters Used' of a log summary."""
    out: dict[str, float] = {}
    for key, pat in LOG_PARAMS.items():
        m = re.search(pat, text, re.MULTILINE)
        if m:
            out[key] = float(m.group(1))
    return out
