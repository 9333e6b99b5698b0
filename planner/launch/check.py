"""Check printed launch recipes against the engines' flag lists (planner/engines/flags/*.json).

`problems(text)` reads the shell text `launch_commands` prints: heredoc files (`cat > f <<EOF`),
backslash-continued commands, comments. Each command is split with shlex and parsed by an
argparse parser rebuilt from the flag list of the program it starts (SGLang server and router,
`vllm serve`, `trtllm-serve` and its `disaggregated` proxy, srun), so an unknown flag, a
missing value or a value outside the engine's choices is a problem. YAML and JSON option files
are checked against the option names extracted for them (TRT-LLM LLM API options and
disaggregated config, vLLM's JSON-valued configs, the DynamoGraphDeployment fields). It returns
problems as one line each; it never runs or imports an engine.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from functools import cache
from pathlib import Path
from typing import Any

import yaml

FLAGS = Path(__file__).resolve().parent.parent / "engines" / "flags"
FILES = {
    "sglang": "sglang-0.5.23.json",
    "router": "sglang-router-0.3.2.json",
    "vllm": "vllm-0.33.0.json",
    "trtllm": "trtllm-source-snapshot.json",
    "srun": "slurm-srun.json",
    "dynamo": "dynamo-1.6.1.json",
}
# DynamoGraphDeployment v1alpha1 service fields the planner writes (Dynamo Kubernetes docs:
# services.<name>.componentType/subComponentType/replicas/resources.limits.gpu/multinode.nodeCount/
# extraPodSpec.mainContainer{image,command,args}).
DGD_SERVICE = {"componentType", "subComponentType", "replicas", "resources", "multinode", "extraPodSpec"}
DGD_CONTAINER = {"image", "command", "args"}


# What the shell substitutes before an engine sees its arguments: every ${NAME:?why} placeholder
# the recipes print gets a sample value of its kind, and $((a * b)) its product.
SAMPLES = {"NODE_RANK": "1", "CHECKPOINT": "org/checkpoint", "DYNAMO_IMAGE": "registry.example/dynamo:1.6.1"}
_VAR = re.compile(r"\$\{(\w+):\?[^}]*\}")
_MUL = re.compile(r"\$\(\((\d+) \* (\d+)\)\)")


def expand(text: str) -> str:
    """`text` after the shell's parameter and arithmetic expansion, with sample values."""
    text = _VAR.sub(lambda m: SAMPLES.get(m.group(1), "10.0.0.1"), text)
    return _MUL.sub(lambda m: str(int(m.group(1)) * int(m.group(2))), text)


class _Rejected(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would exit; a check reports instead
        raise _Rejected(message)


@cache
def flag_file(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FLAGS / FILES[name]).read_text())
    return data


def _parser(flags: list[dict[str, Any]]) -> _Parser:
    p = _Parser(add_help=False, allow_abbrev=False, conflict_handler="resolve", prog="check")
    types = {"int": int, "float": float}
    for f in flags:
        kind = types.get(f.get("type") or "", str)
        if f["positional"]:
            p.add_argument(f["options"][0], nargs="?")
        elif not f["takes_value"]:
            p.add_argument(*f["options"], action="store_true")
        else:
            p.add_argument(*f["options"], nargs=f["nargs"], choices=f["choices"] or None, action="append", type=kind)
    return p


@cache
def parser(name: str, sub: str | None = None) -> _Parser:
    data = flag_file(name)
    return _parser(data["subcommands"][sub] if sub else data["flags"])


def option_names(name: str) -> set[str]:
    return {o for f in flag_file(name)["flags"] for o in f["options"]}


def parse(name: str, argv: list[str], sub: str | None = None) -> dict[str, Any]:
    """The parsed flags (dest -> value); raises _Rejected with the parser's message, or for a
    flag the engine's parser marks deprecated."""
    flags = flag_file(name)["subcommands"][sub] if sub else flag_file(name)["flags"]
    old = {o for f in flags if f.get("deprecated") for o in f["options"]}
    used = {a.split("=")[0] for a in argv if a.startswith("-")}
    if used & old:
        raise _Rejected(f"deprecated: {', '.join(sorted(used & old))}")
    return vars(parser(name, sub).parse_args(argv))


def split(text: str) -> tuple[list[list[str]], dict[str, str]]:
    """Commands (argv lists) and heredoc files (name -> body) of a printed recipe."""
    commands: list[list[str]] = []
    files: dict[str, str] = {}
    lines = iter(text.splitlines())
    pending = ""
    for line in lines:
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.startswith("cat > ") and "<<" in line:
            name = line.split()[2]
            body = "\n".join(iter(lambda: next(lines), "EOF"))
            files[name] = body if line.endswith("<<'EOF'") else expand(body)
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        commands.append([expand(w) for w in shlex.split(pending + line)])
        pending = ""
    if pending:
        commands.append([expand(w) for w in shlex.split(pending)])
    return commands, files


def problems(text: str) -> list[str]:
    """Every problem of a printed recipe, one line each (empty: all commands parse)."""
    commands, files = split(text)
    out: list[str] = []
    for argv in commands:
        try:
            _command(argv, files)
        except (_Rejected, ValueError, KeyError) as exc:
            out.append(f"{' '.join(argv[:3])} ...: {exc}")
    return out


def _command(argv: list[str], files: dict[str, str]) -> None:
    if argv[:3] == ["python", "-m", "sglang.launch_server"]:
        parse("sglang", argv[3:])
    elif argv[:3] == ["python", "-m", "sglang_router.launch_router"]:
        parse("router", argv[3:])
    elif argv[:2] == ["vllm", "serve"]:
        _vllm_values(parse("vllm", argv[2:]))
    elif argv[0] == "srun":
        at = argv.index("trtllm-llmapi-launch")
        parse("srun", argv[1:at])
        _command(argv[at + 1 :], files)
    elif argv[:2] == ["trtllm-serve", "disaggregated"]:
        args = parse("trtllm", argv[2:], "disaggregated")
        _disagg_yaml(yaml.safe_load(files[args["config_file"][-1]]))
    elif argv[0] == "trtllm-serve":
        args = parse("trtllm", argv[1:])
        if args.get("config"):
            _llm_options(yaml.safe_load(files[args["config"][-1]]))
    elif argv[:3] == ["kubectl", "apply", "-f"]:
        _dgd(yaml.safe_load(files[argv[3]]))
    else:
        raise ValueError("not a command of any checked engine")


def _keys(where: str, given: dict[str, Any], schema: dict[str, Any]) -> None:
    unknown = sorted(set(given) - set(schema["fields"]))
    if unknown:
        raise ValueError(f"{where}: unknown option(s) {', '.join(unknown)}")
    for key, allowed in schema.get("choices", {}).items():
        if key in given and given[key] is not None and str(given[key]) not in allowed:
            raise ValueError(f"{where}.{key}: {given[key]!r} not in {allowed}")


def _vllm_values(args: dict[str, Any]) -> None:
    """vLLM's checks after argparse: CacheDType values and the JSON configs' field names."""
    data = flag_file("vllm")
    for flag, allowed in data["value_choices"].items():
        for value in args.get(flag.lstrip("-").replace("-", "_")) or []:
            if value not in allowed:
                raise ValueError(f"{flag} {value!r} not in vLLM's choices")
    for flag, schema in data["json_values"].items():
        for value in args.get(flag.lstrip("-").replace("-", "_")) or []:
            _keys(flag, json.loads(value), schema)


def _llm_options(opts: dict[str, Any]) -> None:
    schema = flag_file("trtllm")["yaml"]["llm_api_options"]
    _keys("LLM API options", opts, schema)
    for key, sub in schema["nested"].items():
        if isinstance(opts.get(key), dict):
            _keys(key, opts[key], sub)


def _disagg_yaml(cfg: dict[str, Any]) -> None:
    schema = flag_file("trtllm")["yaml"]["disagg_config"]
    _keys("disaggregated config", cfg, schema)
    for section in ("context_servers", "generation_servers"):
        servers = cfg.get(section) or {}
        _keys(section, servers, {"fields": schema["server_section"]})
        if len(servers.get("urls", [])) != servers.get("num_instances", 1):
            urls, n = len(servers.get("urls", [])), servers.get("num_instances")
            raise ValueError(f"{section}: {urls} urls for num_instances {n}")


def _dgd(spec: dict[str, Any]) -> None:
    if spec.get("apiVersion") != "nvidia.com/v1alpha1" or spec.get("kind") != "DynamoGraphDeployment":
        raise ValueError("not a nvidia.com/v1alpha1 DynamoGraphDeployment")
    for name, svc in spec["spec"]["services"].items():
        _keys(f"service {name}", svc, {"fields": sorted(DGD_SERVICE)})
        container = svc["extraPodSpec"]["mainContainer"]
        _keys(f"service {name} mainContainer", container, {"fields": sorted(DGD_CONTAINER)})
        if svc["componentType"] == "frontend":
            continue
        if svc["componentType"] != "worker" or svc.get("subComponentType") not in ("prefill", "decode"):
            raise ValueError(f"service {name}: componentType worker with subComponentType prefill|decode expected")
        if container["command"][:2] != ["python3", "-m"]:
            raise ValueError(f"service {name}: command must be python3 -m dynamo.<engine>")
        _dynamo_worker(container["command"][2].removeprefix("dynamo."), [str(a) for a in container["args"]])


def _dynamo_worker(engine: str, args: list[str]) -> None:
    """A Dynamo worker takes the engine's flags plus Dynamo's own (all of which take a value)."""
    ours = set(flag_file("dynamo")["workers"][engine]) | set(flag_file("dynamo")["workers"]["common"])
    if engine == "trtllm":
        pairs = dict(zip(args[::2], args[1::2], strict=True))
        unknown = sorted(set(pairs) - ours)
        if unknown:
            raise ValueError(f"dynamo.trtllm: unknown flag(s) {', '.join(unknown)}")
        if "--override-engine-args" in pairs:
            _llm_options(json.loads(pairs["--override-engine-args"]))
        return
    name = {"sglang": "sglang", "vllm": "vllm"}[engine]
    theirs = option_names(name)
    rest: list[str] = []
    it = iter(args)
    for a in it:
        if a in ours and a not in theirs:
            next(it)  # a Dynamo flag and its value
        else:
            rest.append(a)
    parsed = parse(name, rest)
    if name == "vllm":
        _vllm_values(parsed)
