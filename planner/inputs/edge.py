"""The input edge: reading user files and turning validation failures into one-line messages.

`read_text` reads a file as UTF-8 text within a size limit; `load_yaml` parses it with limits on
nesting depth and on the number of values (YAML aliases can expand a small file into billions);
`check_tree` refuses NaN, infinities and magnitudes no planner quantity reaches; `parse_as`
validates a mapping with a pydantic model and `format_validation_error` writes the failure as one
line naming each field and what is allowed, never pydantic's internal class or union-member
names; `json_text` is the matching rule for output: valid JSON, NaN and infinities as null.
This module only checks the shape of input; the physical rules live in the schemas.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, TypeVar, get_args

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from roofline.errors import PlannerError

M = TypeVar("M", bound=BaseModel)

MAX_FILE_BYTES = 8 << 20  # 8 MiB: the largest scenario/anchor file shipped is under 20 kB
MAX_DEPTH = 32  # the deepest valid scenario nests 5 levels (simulation.arrival.schedule[i][j])
MAX_VALUES = 200_000  # values after alias expansion: a 10,000-anchor file stays well under this
MAX_MAGNITUDE = 1e15  # no quantity the planner takes (tokens, GPUs, requests, rates, ms) comes near
MAX_ERRORS = 4  # field errors shown in one message before "and N more"

_TYPE_TAGS = {"int", "float", "str", "bool", "none", "list", "dict", "tuple", "set", "is-instance"}


class ScenarioError(PlannerError):
    """A scenario, anchor or question file that does not validate."""


def one_line(text: str, limit: int = 300) -> str:
    """Collapse whitespace (newlines included) so a message prints as one line."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def read_text(path: str | Path, what: str = "file") -> str:
    """The file's text; missing, unreadable, oversized or non-UTF-8 files are a ScenarioError."""
    p = Path(path)
    try:
        if p.is_dir():
            raise ScenarioError(f"{p}: is a folder, expected a {what}")
        if p.stat().st_size > MAX_FILE_BYTES:
            raise ScenarioError(f"{p}: larger than {MAX_FILE_BYTES >> 20} MiB; a {what} is a small text file")
        raw = p.read_bytes()
    except FileNotFoundError as exc:
        raise ScenarioError(f"file not found: {p}") from exc
    except OSError as exc:
        raise ScenarioError(f"{p}: cannot be read ({one_line(exc.strerror or str(exc))})") from exc
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{p}: not UTF-8 text (byte {exc.start} is 0x{raw[exc.start]:02x})") from exc


def load_yaml(path: str | Path, finite: bool = True) -> Any:
    """Parse a YAML file within the limits above; errors are one line with the line number.
    `finite=False` leaves NaN/infinite numbers to the caller (an anchor file checks each anchor)."""
    p = Path(path)
    text = read_text(p, "YAML file")
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ScenarioError(f"{p}: not valid YAML{at}: {one_line(exc.problem or str(exc))}") from exc
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{p}: not valid YAML: {one_line(str(exc))}") from exc
    except RecursionError as exc:
        raise ScenarioError(f"{p}: nested deeper than {MAX_DEPTH} levels") from exc
    check_tree(data, str(p), finite)
    return data


def check_tree(data: Any, where: str, finite: bool = True) -> None:
    """Refuse nesting deeper than MAX_DEPTH, more than MAX_VALUES values, non-string keys, and
    numbers that are NaN, infinite or beyond MAX_MAGNITUDE; the message names the path."""
    count = 0
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        node, path, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise ScenarioError(f"{where}: more than {MAX_VALUES:,} values (YAML aliases expanded)")
        if depth > MAX_DEPTH:
            raise ScenarioError(f"{where}: {path or '(top level)'}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, dict):
            for k, v in node.items():
                if not isinstance(k, str):
                    raise ScenarioError(f"{where}: {path or '(top level)'}: key {one_line(repr(k), 40)} is not a name")
                stack.append((v, f"{path}.{k}" if path else k, depth + 1))
        elif isinstance(node, list | tuple):
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(node))
        elif isinstance(node, float | int) and not isinstance(node, bool):
            if isinstance(node, float) and not math.isfinite(node):
                if not finite:
                    continue
                raise ScenarioError(f"{where}: {path or '(top level)'}: must be a finite number (got {node})")
            if abs(node) > MAX_MAGNITUDE:
                raise ScenarioError(
                    f"{where}: {path or '(top level)'}: {node:.3g} is beyond any physical value (at most 1e15)"
                )


def _is_tag(part: Any) -> bool:
    """Union-member and validator names pydantic puts in error locations (`PoolSpec`, `list[int]`)."""
    if isinstance(part, int):
        return False
    s = str(part)
    return "[" in s or "-" in s or s in _TYPE_TAGS or bool(re.fullmatch(r"[A-Z][A-Za-z0-9_]*", s))


def _is_type_error(kind: str) -> bool:
    return kind.endswith("_type") or kind in ("literal_error", "union_tag_invalid", "is_instance_of")


def _clean_msg(err: ErrorDetails) -> str:
    msg = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    msg = re.sub(r"a valid dictionary or instance of \w+", "a mapping of fields", msg)
    msg = re.sub(r"instance of \w+", "a mapping of fields", msg)
    msg = re.sub(r"^Input should be (a valid|'|\[)", r"expected \1", msg).replace("Input should be", "must be")
    msg = msg.replace("Field required", "required").replace("String should match pattern", "must match")
    # long enough for a field's whole list of allowed values (the anchor metrics' is ~400 characters)
    return one_line(msg.replace("Extra inputs are not permitted", "unknown field"), 600).strip()


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (itself, or inside Optional, unions, lists, dicts)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def _allowed_at(model: type[BaseModel] | None, path: tuple[Any, ...]) -> list[str]:
    """The field names a mapping at `path` (field names; list indices skipped) of `model` accepts;
    [] where the path leaves the models or is ambiguous."""
    models = [model] if model is not None else []
    for part in path:
        if isinstance(part, int):
            continue
        found = (m for cls in models if part in cls.model_fields for m in _models_in(cls.model_fields[part].annotation))
        models = list(dict.fromkeys(found))
    if len(models) != 1:
        return []
    return [f.alias or name for name, f in models[0].model_fields.items()]


def format_validation_error(exc: ValidationError, where: str, model: type[BaseModel] | None = None) -> str:
    """One line: `where: field.path: what is allowed (got X); ...`, union noise removed; an unknown
    field lists the fields allowed there (from `model`, the schema validated against)."""
    groups: dict[tuple[Any, ...], list[ErrorDetails]] = {}
    for err in exc.errors():
        loc = list(err["loc"])
        keep_last = err["type"] == "extra_forbidden" and loc
        parts = [x for x in (loc[:-1] if keep_last else loc) if not _is_tag(x)]
        if keep_last:
            parts.append(loc[-1])
        groups.setdefault(tuple(parts), []).append(err)
    # a union tried as a mapping and as a list fails shallowly for one and deeply for the other:
    # the deeper error is the one about the user's input
    paths = [p for p in groups if not any(q != p and q[: len(p)] == p for q in groups)]
    out = []
    for path in paths:
        errs = groups[path]
        rules = [e for e in errs if not _is_type_error(e["type"])]
        errs = rules or errs  # the union member that matched the shape broke a rule: say which
        msgs = list(dict.fromkeys(_clean_msg(e) for e in errs))[:3]
        text = msgs[0] + "".join(" or " + m.removeprefix("expected ") for m in msgs[1:])
        got = errs[0].get("input")
        if errs[0]["type"] not in ("extra_forbidden", "missing", "value_error", "assertion_error") and not isinstance(
            got, dict | list
        ):
            text += f" (got {one_line(repr(got), 40)})"
        if errs[0]["type"] == "extra_forbidden" and (allowed := _allowed_at(model, path[:-1])):
            text += f"; allowed: {', '.join(allowed)}"
        name = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in path).lstrip(".")
        named = errs[0]["type"] == "value_error" and (not name or text.startswith((f"{name}.", f"{name}:")))
        if not named:  # a rule over several fields names them itself
            text = f"{one_line(name, 80) or '(top level)'}: {text}"
        out.append(text)
    more = f"; and {len(out) - MAX_ERRORS} more" if len(out) > MAX_ERRORS else ""
    return one_line(f"{where}: " + "; ".join(out[:MAX_ERRORS]) + more, 1200)


def parse_as(model: type[M], data: Any, where: str, what: str) -> M:
    """Validate a mapping as `model`; bad input is a ScenarioError naming each field."""
    if not isinstance(data, dict):
        raise ScenarioError(f"{where}: expected a mapping of {what} fields")
    check_tree(data, where)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(format_validation_error(exc, where, model)) from exc
    except RecursionError as exc:
        raise ScenarioError(f"{where}: nested deeper than {MAX_DEPTH} levels") from exc


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def json_text(obj: Any) -> str:
    """Indented JSON with NaN and infinities written as null (RFC 8259 has no spelling for them)."""
    return json.dumps(_finite(obj), indent=2, allow_nan=False, default=str)
