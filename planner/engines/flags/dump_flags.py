"""Dump an engine's real argument parser to a flag list (`<engine>-<version>.json` here).

Run once per pinned engine version, in a throwaway virtual environment where the engine's
wheel is installed without its GPU dependencies (see README "Launch commands"):

    VLLM_TARGET_DEVICE=cpu python planner/engines/flags/dump_flags.py sglang sglang-router vllm dynamo

It imports each engine's own parser builder (SGLang `ServerArgs.add_cli_args`, the SGLang
router's `RouterArgs.add_cli_args`, vLLM `make_arg_parser` for `vllm serve`) and writes every
argparse action: option strings, whether it takes a value, nargs and choices. The planner never
imports this module; tests read the JSON it wrote (planner/launch/check.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).parent


def _sglang() -> argparse.ArgumentParser:
    from sglang.srt.server_args import ServerArgs  # noqa: PLC0415

    p = argparse.ArgumentParser()
    ServerArgs.add_cli_args(p)
    return p


def _router() -> argparse.ArgumentParser:
    from sglang_router.router_args import RouterArgs  # noqa: PLC0415

    p = argparse.ArgumentParser()
    RouterArgs.add_cli_args(p)
    return p


def _vllm() -> argparse.ArgumentParser:
    from vllm.entrypoints.common.cli_args import make_arg_parser  # noqa: PLC0415
    from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: PLC0415

    return make_arg_parser(FlexibleArgumentParser())


def _literal_choices(tp: object) -> list[str] | None:
    import typing  # noqa: PLC0415

    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) is typing.Literal:
        return sorted(str(a) for a in args)
    for a in args:  # Optional[Literal[...]]
        inner = _literal_choices(a)
        if inner:
            return inner
    return None


def _dataclass_keys(cls: type) -> dict[str, object]:
    """Field names of a config dataclass a JSON-valued flag is parsed into, with Literal choices."""
    import dataclasses  # noqa: PLC0415
    import typing  # noqa: PLC0415

    hints = typing.get_type_hints(cls)
    fields = [f.name for f in dataclasses.fields(cls)]
    choices = {k: c for k in fields if (c := _literal_choices(hints.get(k)))}
    return {"class": f"{cls.__module__}.{cls.__qualname__}", "fields": fields, "choices": choices}


def _vllm_values() -> dict[str, object]:
    """vLLM checks some values after parsing (config dataclasses); their names and choices."""
    import typing  # noqa: PLC0415

    from vllm.config import KVTransferConfig, SpeculativeConfig  # noqa: PLC0415
    from vllm.config.cache import CacheDType  # noqa: PLC0415

    return {
        "value_choices": {"--kv-cache-dtype": sorted(typing.get_args(CacheDType))},
        "json_values": {
            "--speculative-config": _dataclass_keys(SpeculativeConfig),
            "--kv-transfer-config": _dataclass_keys(KVTransferConfig),
        },
    }


VALUES: dict[str, Callable[[], dict[str, object]]] = {"vllm": _vllm_values}

TARGETS: dict[str, tuple[str, str, str, Callable[[], argparse.ArgumentParser]]] = {
    # name: (distribution, command, builder description, builder)
    "sglang": ("sglang", "python -m sglang.launch_server", "sglang.srt.server_args.ServerArgs.add_cli_args", _sglang),
    "sglang-router": (
        "sglang-router",
        "python -m sglang_router.launch_router",
        "sglang_router.router_args.RouterArgs.add_cli_args",
        _router,
    ),
    "vllm": ("vllm", "vllm serve", "vllm.entrypoints.common.cli_args.make_arg_parser", _vllm),
}


def _action(a: argparse.Action) -> dict[str, object]:
    takes_value = a.nargs != 0
    choices = None
    if a.choices is not None and not isinstance(a.choices, dict):
        choices = sorted({str(c) for c in a.choices})
    return {
        "options": list(a.option_strings) or [a.dest],
        "positional": not a.option_strings,
        "takes_value": takes_value,
        "nargs": a.nargs if isinstance(a.nargs, (int, str)) else None,
        "choices": choices,
        "type": a.type.__name__ if a.type in (int, float) else None,
        "deprecated": "deprecated" in type(a).__name__.lower()
        or (a.help or "").lstrip(" [").lower().startswith("deprecated"),
    }


def _wheel_sha256(dist: str) -> str:
    """sha256 of the installed distribution's RECORD file (identifies the exact wheel contents)."""
    d = metadata.distribution(dist)
    record = next(f for f in d.files or [] if f.name == "RECORD")
    return hashlib.sha256(Path(str(d.locate_file(record))).read_bytes()).hexdigest()


def dump_dynamo() -> Path:
    """Dynamo's worker flags cannot be built without its Rust runtime (`dynamo._core`), so its own
    flag names are read from the installed package's argument-group sources (`flag_name="--x"`).
    A Dynamo worker also takes its engine's flags; those are checked against the engine's file."""
    import re  # noqa: PLC0415

    d = metadata.distribution("ai-dynamo")
    root = Path(str(d.locate_file("dynamo")))
    files = {
        "common": "common/configuration/groups/runtime_args.py",
        "sglang": "sglang/backend_args.py",
        "vllm": "vllm/backend_args.py",
        "trtllm": "trtllm/backend_args.py",
    }
    pattern = re.compile(r'flag_name="(--[a-z0-9-]+)"')
    workers = {k: sorted(set(pattern.findall((root / f).read_text()))) for k, f in files.items()}
    out = {
        "engine": "dynamo",
        "version": d.version,
        "command": "python3 -m dynamo.<engine>",
        "provenance": {
            "source": f"PyPI distribution ai-dynamo=={d.version}",
            "record_sha256": _wheel_sha256("ai-dynamo"),
            "files": {k: f"dynamo/{f}" for k, f in files.items()},
            "method": "flag_name= arguments of Dynamo's add_argument helper, read from the package sources",
            "date": dt.date.today().isoformat(),
        },
        "workers": workers,
    }
    path = HERE / f"dynamo-{d.version}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    return path


def dump(name: str) -> Path:
    dist, command, builder_name, builder = TARGETS[name]
    version = metadata.version(dist)
    parser = builder()
    flags = [_action(a) for a in parser._actions if not isinstance(a, argparse._HelpAction)]
    out = {
        "engine": name,
        "version": version,
        "command": command,
        "provenance": {
            "source": f"PyPI distribution {dist}=={version}",
            "record_sha256": _wheel_sha256(dist),
            "parser": builder_name,
            "method": "argparse actions of the engine's own parser, dumped by planner/engines/flags/dump_flags.py",
            "date": dt.date.today().isoformat(),
        },
        "flags": flags,
        **(VALUES[name]() if name in VALUES else {}),
    }
    path = HERE / f"{name}-{version}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    return path


if __name__ == "__main__":
    for target in sys.argv[1:]:
        print(dump_dynamo() if target == "dynamo" else dump(target))
