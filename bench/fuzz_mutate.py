"""Seeded mutations of the project's own inputs, for `bench/fuzz.py` and `tests/fuzz`.

A case is fully determined by (kind, seed, index): `make_case` draws the base input (an example
scenario, anchors from shared/validation/seed_anchors.yaml, rows of a shared trace, a shared HF
config, points of the committed calibration profile, the default plan question) and applies one
to three mutations a hostile user would try: dropped fields, wrong types, NaN/inf, negative and
huge numbers, unknown keys, wrong enum values, contradictory layouts, deep nesting, non-UTF-8
bytes, truncation. It returns the files to write and what to run; it runs nothing itself.
"""

from __future__ import annotations

import copy
import json
import math
import random
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path("/work/shared") if Path("/work/shared").is_dir() else ROOT.parent / "shared"
KINDS = ("scenarios", "cli", "anchors", "traces", "questions", "hf", "profiles")

HOSTILE: list[Any] = [
    None,
    "",
    "abc",
    "unknown",
    -1,
    0,
    1,
    -0.5,
    0.5,
    1.5,
    7,
    3.0,
    1e18,
    -1e18,
    10**30,
    2**63,
    1e-300,
    float("nan"),
    float("inf"),
    float("-inf"),
    True,
    False,
    [],
    {},
    [1, 2],
    {"a": 1},
    "[/bold]",
    "x\ny",
    "\x00",
    "9" * 400,
    100_000,
    1_000_000,
    10_000_000,
    10**9,
]
NUMERIC = [0, -1, 1, 2, 3, 8, 16, 48, 72, 1e-9, 1e9, 1e15, 2**31, float("nan"), float("inf")]


@dataclass
class Case:
    kind: str
    index: int
    action: str  # what to run on the files (target-specific)
    files: dict[str, bytes] = field(default_factory=dict)
    mutations: list[str] = field(default_factory=list)
    main: str = "input.yaml"  # the file the action reads


@cache
def examples() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for p in sorted((ROOT / "examples").glob("*.yaml")):
        data = yaml.safe_load(p.read_text())
        trace = (data.get("simulation") or {}).get("trace")
        if trace:  # absolute, so the case runs from a temporary folder
            trace["path"] = str((p.parent / trace["path"]).resolve())
        out.append((p.name, data))
    return out


@cache
def seed_anchors() -> list[dict[str, Any]]:
    return list(yaml.safe_load((SHARED / "validation" / "seed_anchors.yaml").read_text())["anchors"])


@cache
def trace_lines(name: str) -> list[str]:
    return (SHARED / "traces" / name).read_text().splitlines()[:200]


@cache
def hf_configs() -> list[tuple[str, dict[str, Any]]]:
    return [(p.name, json.loads(p.read_text())) for p in sorted((SHARED / "reference" / "hf_configs").glob("*.json"))]


@cache
def profile() -> dict[str, Any]:
    return dict(json.loads((ROOT / "calibration" / "data" / "h200-sxm-profile.json").read_text()))


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a tree of dicts and lists (the root excluded)."""
    out: list[tuple[Any, ...]] = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for k, v in items:
        out.append((*prefix, k))
        out.extend(_paths(v, (*prefix, k)))
    return out


def _parent(tree: Any, path: tuple[Any, ...]) -> Any:
    for k in path[:-1]:
        tree = tree[k]
    return tree


def mutate_tree(tree: Any, rng: random.Random, n: int) -> list[str]:
    """Apply n structural or value mutations in place; returns their descriptions."""
    done = []
    for _ in range(n):
        paths = _paths(tree)
        if not paths:
            break
        path = rng.choice(paths)
        parent, key = _parent(tree, path), path[-1]
        op = rng.choice(
            [
                "drop",
                "hostile",
                "hostile",
                "number",
                "scale",
                "unknown_key",
                "enum",
                "nest",
                "swap_type",
                "plausible",
                "plausible",
                "plausible",
                "plausible",
            ]
        )
        where = ".".join(map(str, path))
        if op == "drop" and isinstance(parent, dict):
            del parent[key]
        elif op == "hostile":
            parent[key] = copy.deepcopy(rng.choice(HOSTILE))
        elif op == "number":
            parent[key] = rng.choice(NUMERIC)
        elif op == "scale" and isinstance(parent[key], int | float) and not isinstance(parent[key], bool):
            v = parent[key] * rng.choice([-1, 0, 2, 10, 1000, 1e6, 1e-6, 0.5])
            parent[key] = int(v) if isinstance(v, float) and math.isfinite(v) and rng.random() < 0.5 else v
        elif op == "plausible" and isinstance(parent[key], int | float) and not isinstance(parent[key], bool):
            v = parent[key]  # stays valid-looking: a factor of 1/20 .. 20, same type, same sign
            f = math.exp(rng.uniform(-3, 3))
            parent[key] = max(1, round(v * f)) if isinstance(v, int) else v * f
        elif op == "unknown_key" and isinstance(parent, dict):
            parent[rng.choice(["foo", "Model", "tp_size", "requests_", "1"])] = 1
        elif op == "enum" and isinstance(parent[key], str):
            parent[key] = rng.choice(["h300", "fp3", "sglang2", "closed", "trace", "decode", "UNKNOWN", "ep"])
        elif op == "nest":
            parent[key] = [parent[key]] if rng.random() < 0.5 else {"value": parent[key]}
        elif op == "swap_type":
            v = parent[key]
            parent[key] = str(v) if not isinstance(v, str) else [v]
        else:
            continue
        done.append(f"{op} {where}")
    return done


def mutate_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:  # noqa: PLR0911 (one per mutation)
    op = rng.choice(["utf8", "truncate", "deep", "flip", "empty", "alias_bomb", "dup"])
    if op == "utf8":
        at = rng.randrange(len(data) + 1)
        return data[:at] + bytes([0xFF, 0xFE, 0xC3]) + data[at:], "non-UTF-8 bytes"
    if op == "truncate":
        return data[: rng.randrange(len(data) + 1)], "truncated"
    if op == "deep":
        depth = rng.choice([40, 500, 5000, 50_000])
        return b"a: " + b"[" * depth + b"1" + b"]" * depth + b"\n", f"nested {depth} deep"
    if op == "flip":
        b = bytearray(data)
        for _ in range(rng.randint(1, 5)):
            if b:
                b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b), "bytes flipped"
    if op == "empty":
        return b"", "empty file"
    if op == "alias_bomb":
        lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        lines += [f"a{i}: &a{i} [{', '.join(['*a' + str(i - 1)] * 10)}]" for i in range(1, 9)]
        return ("\n".join(lines) + "\n").encode(), "alias bomb"
    return data + data, "duplicated keys"


def dump(tree: Any) -> bytes:
    return yaml.safe_dump(tree, sort_keys=False, allow_unicode=True).encode()


def _tree_case(kind: str, index: int, action: str, tree: Any, rng: random.Random, main: str) -> Case:
    case = Case(kind, index, action, main=main)
    if rng.random() < 0.15:  # a file-level mutation instead of a tree one
        data, what = mutate_bytes(dump(tree) if main.endswith(".yaml") else json.dumps(tree).encode(), rng)
        case.files[main], case.mutations = data, [what]
        return case
    case.mutations = mutate_tree(tree, rng, rng.choice([1, 1, 2, 3]))
    text = dump(tree) if main.endswith(".yaml") else json.dumps(tree).encode()
    case.files[main] = text
    return case


def make_case(kind: str, seed: int, index: int) -> Case:
    rng = random.Random(f"{seed}:{kind}:{index}")
    if kind in ("scenarios", "cli"):
        name, base = rng.choice(examples())
        tree = copy.deepcopy(base)
        action = rng.choice(["estimate", "estimate", "simulate", "explain"])
        if kind == "cli":
            action += rng.choice(["", " --json"])
            if rng.random() < 0.2:  # hostile command-line overrides
                flags = {
                    "estimate": ["--concurrency nan", "--concurrency -5", "--concurrency 0", "--concurrency 1e30"],
                    "simulate": ["--requests 0", "--requests 10000000", "--seed -1", "--seed 99999999999999999999"],
                    "explain": [""],
                }[action.split()[0]]
                action += " " + rng.choice(flags)
        case = _tree_case(kind, index, action, tree, rng, "input.yaml")
        case.mutations.insert(0, name)
        return case
    if kind == "anchors":
        anchors = copy.deepcopy(rng.sample(seed_anchors(), rng.choice([1, 1, 2])))
        tree = {"version": 1, "anchors": anchors}
        return _tree_case(kind, index, "validate", tree, rng, "anchors.yaml")
    if kind == "traces":
        return _trace_case(index, rng)
    if kind == "questions":
        tree = {
            "model": "qwen3-30b-a3b",
            "hardware": "h100-sxm",
            "max_gpus": 8,
            "isl": 1000,
            "osl": 200,
            "slo": {"ttft_p90_ms": 2000, "tpot_p90_ms": 50},
            "verify_top": 1,
        }
        return _tree_case(kind, index, "plan", tree, rng, "question.yaml")
    if kind == "hf":
        name, base = rng.choice(hf_configs())
        case = _tree_case(kind, index, "hf", copy.deepcopy(base), rng, "model_config.json")
        case.mutations.insert(0, name)
        return case
    if kind == "profiles":
        prof = profile()
        tree = {**prof, "points": copy.deepcopy(rng.sample(prof["points"], 6))}
        return _tree_case(kind, index, "profile", tree, rng, "profile.json")
    raise ValueError(f"unknown kind {kind!r}; allowed: {', '.join(KINDS)}")


def _trace_case(index: int, rng: random.Random) -> Case:
    fmt = rng.choice(["splitwise", "splitwise", "mooncake", "azure"])
    rows = [line.split(",") for line in trace_lines("splitwise_conv.csv")[1 : rng.randint(2, 60)]]
    for _ in range(rng.choice([1, 1, 2, 4])):  # row mutations
        r = rng.choice(rows)
        r[rng.randrange(3)] = str(rng.choice(["", "abc", "-5", "0", "1e12", "1e400", "nan", "inf", "9" * 30, "2.5"]))
    if fmt == "mooncake":
        lines = [
            json.dumps({"timestamp": float(t) * 1000 if _num(t) else t, "input_length": i, "output_length": o})
            for t, i, o in rows
        ]
        text = "\n".join(lines) + "\n"
    else:
        head = "TIMESTAMP,ContextTokens,GeneratedTokens" if fmt == "azure" else trace_lines("splitwise_conv.csv")[0]
        text = head + "\n" + "\n".join(",".join(r) for r in rows) + "\n"
    data = text.encode()
    what = ["rows mutated"]
    if rng.random() < 0.2:
        data, extra = mutate_bytes(data, rng)
        what.append(extra)
    scenario = {
        "model": "llama-3.1-8b",
        "hardware": "h100-sxm",
        "deployment": {"aggregated": {"gpus_per_instance": 1}},
        "workload": {"isl": 1000, "osl": 100, "request_rate": 1},
        "simulation": {"requests": 60, "trace": {"path": "trace.txt", "format": fmt}},
    }
    if rng.random() < 0.1:
        scenario["simulation"]["trace"]["path"] = "."  # a folder
        what.append("trace path is a folder")
    return Case("traces", index, "simulate", {"trace.txt": data, "input.yaml": dump(scenario)}, [fmt, *what])


def _num(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True
