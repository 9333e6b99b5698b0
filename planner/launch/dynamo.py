"""A disaggregated plan as a Dynamo deployment: the DynamoGraphDeployment resource
(apiVersion nvidia.com/v1alpha1) with a frontend and one prefill and one decode worker service,
each with its replicas, GPUs per node, `multinode.nodeCount` when an instance spans nodes, and
the worker command (`python3 -m dynamo.<engine>` with the engine's own flags). Field names
follow Dynamo's Kubernetes docs (services.<name>.componentType, subComponentType, replicas,
resources.limits.gpu per node, multinode.nodeCount, extraPodSpec.mainContainer). The Dynamo
operator adds the multi-node rendezvous flags itself, so none are printed here.
"""

from __future__ import annotations

import json

import yaml

from planner.launch import sglang, trtllm, vllm
from planner.launch.common import Inst, Weights, tool

API_VERSION = "nvidia.com/v1alpha1"
IMAGE = "${DYNAMO_IMAGE:?a Dynamo runtime image for the engine, matching ai-dynamo 1.6.1}"


def _flat(args: list[tuple[str, ...]]) -> list[str]:
    return [w for pair in args for w in pair]


def worker_args(engine: str, i: Inst, w: Weights, mla: bool) -> list[str]:
    """The worker's arguments: the engine's flags for this pool plus Dynamo's role flag."""
    d = tool(engine, "dynamo")
    if engine == "sglang":
        return _flat(sglang.server_args(i, w))
    if engine == "vllm":
        return [d.f("model"), w.path, *_flat(vllm.engine_args(i, w, mla)), d.f("disagg_mode"), i.role]
    o = trtllm.options(i)
    return [d.f("model"), trtllm.usable(w).path, d.f("disagg_mode"), i.role, d.f("override_engine_args"), json.dumps(o)]


def _service(engine: str, i: Inst, w: Weights, mla: bool) -> dict[str, object]:
    svc: dict[str, object] = {
        "componentType": "worker",
        "subComponentType": i.role,
        "replicas": i.instances,
        "resources": {"limits": {"gpu": str(i.gpus_per_node)}},
    }
    if i.nodes > 1:
        svc["multinode"] = {"nodeCount": i.nodes}
    command = ["python3", "-m", tool(engine, "dynamo").command.split()[-1]]
    args = worker_args(engine, i, w, mla)
    svc["extraPodSpec"] = {"mainContainer": {"image": IMAGE, "command": command, "args": args}}
    return svc


def deployment(engine: str, name: str, pre: Inst, dec: Inst, wp: Weights, wd: Weights, mla: bool) -> str:
    """The DynamoGraphDeployment YAML and the command that applies it."""
    spec = {
        "apiVersion": API_VERSION,
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": name},
        "spec": {
            "services": {
                "Frontend": {
                    "componentType": "frontend",
                    "replicas": 1,
                    "extraPodSpec": {"mainContainer": {"image": IMAGE}},
                },
                "PrefillWorker": _service(engine, pre, wp, mla),
                "DecodeWorker": _service(engine, dec, wd, mla),
            }
        },
    }
    body = yaml.safe_dump(spec, sort_keys=False, width=400).rstrip()
    return (
        f"# Dynamo deployment ({engine} workers): DYNAMO_IMAGE = the runtime image; needs the Dynamo operator\n"
        f"cat > dynamo.yaml <<EOF\n{body}\nEOF\nkubectl apply -f dynamo.yaml"
    )
