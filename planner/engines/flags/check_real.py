"""Parse printed launch commands with the engines' real parsers (not the flag lists).

Run in the throwaway virtualenv where `dump_flags.py` runs (SGLang, sglang-router and vLLM
installed without GPU dependencies), from the repository root:

    PYTHONPATH=$PWD VLLM_TARGET_DEVICE=cpu python planner/engines/flags/check_real.py SEED N

It plans the default question and N random ones (seeded, verify_top 0), and parses the SGLang
server and router commands, `vllm serve` commands and the SGLang/vLLM Dynamo worker arguments
of the top three answers with SGLang's `ServerArgs.add_cli_args`, `RouterArgs.add_cli_args` and
vLLM's `make_arg_parser`, after the shell expansion `planner.launch.check.split` applies. It
prints each rejection and a count. CI cannot install the engines; this is the cross-check that
the committed flag lists agree with the real parsers.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Iterator
from typing import Any

import yaml

from planner.inputs.question import DEFAULT_QUESTION, Question
from planner.launch import ENGINES, launch_commands
from planner.launch.check import split
from planner.search.plan import plan
from roofline.catalog import hardware_ids, model_ids


class _Strict(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise ValueError(message)


def _parsers() -> tuple[Any, Any, Any]:
    from sglang.srt.server_args import ServerArgs  # noqa: PLC0415
    from sglang_router.router_args import RouterArgs  # noqa: PLC0415
    from vllm.entrypoints.common.cli_args import make_arg_parser  # noqa: PLC0415
    from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: PLC0415

    sg, rt = _Strict(), _Strict()
    ServerArgs.add_cli_args(sg)
    RouterArgs.add_cli_args(rt)
    return sg, rt, make_arg_parser(FlexibleArgumentParser())


def _vllm(parser: Any, argv: list[str]) -> None:
    try:
        parser.parse_args(argv)
    except SystemExit as exc:
        raise ValueError(f"vllm serve rejected the arguments (exit {exc.code})") from None


def _commands(text: str) -> Iterator[tuple[str, list[str]]]:
    commands, files = split(text)
    for argv in commands:
        if argv[:3] == ["python", "-m", "sglang.launch_server"]:
            yield "sglang", argv[3:]
        elif argv[:3] == ["python", "-m", "sglang_router.launch_router"]:
            yield "router", argv[3:]
        elif argv[:2] == ["vllm", "serve"]:
            yield "vllm", argv[2:]
    if "dynamo.yaml" in files:
        for svc in yaml.safe_load(files["dynamo.yaml"])["spec"]["services"].values():
            c = svc["extraPodSpec"]["mainContainer"]
            args = [str(a) for a in c.get("args", [])]
            if c.get("command", [])[-1:] == ["dynamo.sglang"]:
                yield "sglang", args
            elif c.get("command", [])[-1:] == ["dynamo.vllm"]:
                k = args.index("--disaggregation-mode")  # Dynamo's own flag
                yield "vllm", args[:k] + args[k + 2 :]


def main(seed: int, n: int) -> int:
    sg, rt, vl = _parsers()
    rng = random.Random(seed)
    questions = [DEFAULT_QUESTION.model_copy(update={"verify_top": 0})]
    questions += [
        Question.model_validate(
            {
                "model": rng.choice(model_ids()),
                "hardware": rng.choice(hardware_ids()),
                "max_gpus": rng.choice([8, 16, 32, 72]),
                "engine": rng.choice(ENGINES),
                "verify_top": 0,
            }
        )
        for _ in range(n)
    ]
    parsed = rejected = 0
    for q in questions:
        for r in plan(q, workers=2).recommendations[:3]:
            for engine, text in launch_commands(q, r).items():
                for kind, argv in _commands(text):
                    try:
                        _vllm(vl, argv) if kind == "vllm" else (sg if kind == "sglang" else rt).parse_args(argv)
                        parsed += 1
                    except ValueError as exc:
                        rejected += 1
                        print(f"{q.model} {q.hardware} {engine} {kind}: {exc}")
    print(f"real parsers: {parsed} commands parsed, {rejected} rejected")
    return 1 if rejected else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2])))
