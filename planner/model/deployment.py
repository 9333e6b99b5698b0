"""The one deployment type: pools of a role (prefill, decode or aggregated), each a number of
identical instances with one `InstanceSpec` (model, GPU, parallelism, precision, engine runtime
options, MTP). Scenario resolution (`planner.model.defaults.resolve`) and the planner's search both
build it with `make_pool`; the estimator, the simulator, explain, launch and the dashboard read
it. It holds no traffic and no results.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, replace

from planner.engines import runtime_options
from roofline.catalog.schema import HardwareSpec, ModelSpec
from roofline.deployment import InstanceSpec, MTPConfig, Parallelism
from roofline.errors import NoNetworkError
from roofline.precision import PrecisionMix

ROLES = ("prefill", "decode", "aggregated")


def layout_label(p: Parallelism) -> str:
    """TP4 EP4, DP32 EP32, TP8 EP8 PP2, ..."""
    parts = [
        f"TP{p.tp}" if p.tp > 1 or p.dp_attention == 1 else "",
        f"DP{p.dp_attention}" if p.dp_attention > 1 else "",
        f"EP{p.ep}" if p.ep > 1 else "",
        f"PP{p.pp}" if p.pp > 1 else "",
    ]
    return " ".join(x for x in parts if x)


def precision_label(p: PrecisionMix, experts: bool = True) -> str:
    """attention/KV/dense/experts, e.g. fp8/fp8/bf16/mxfp4: the one precision label of every view; a
    dense model (`experts` False) has none, '-' (its label read '.../bf16' for experts it lacks)."""
    return f"{p.attention}/{p.kv_cache}/{p.dense}/{p.moe if experts else '-'}"


@dataclass(frozen=True, slots=True, eq=False)
class Pool:
    role: str  # prefill | decode | aggregated
    instances: int
    instance: InstanceSpec

    @property
    def parallel(self) -> Parallelism:
        return self.instance.parallel

    @property
    def gpus_per_instance(self) -> int:
        return self.instance.parallel.gpus

    @property
    def gpus(self) -> int:
        return self.instances * self.gpus_per_instance

    @property
    def label(self) -> str:
        return f"{self.instances}x {self.role} {layout_label(self.parallel)}"

    def layout(self) -> dict[str, int]:
        """The pool's layout in scenario fields (`deployment.<role>` of a scenario file)."""
        par = self.parallel
        return {
            "instances": self.instances,
            "gpus_per_instance": par.gpus,
            "tp": par.tp,
            "dp_attention": par.dp_attention,
            "ep": par.ep,
            "pp": par.pp,
        }


@dataclass(frozen=True, slots=True, eq=False)
class Deployment:
    engine: str
    pools: tuple[Pool, ...]

    @property
    def model(self) -> ModelSpec:
        return self.pools[0].instance.model

    @property
    def hardware(self) -> HardwareSpec:
        return self.pools[0].instance.hardware

    @property
    def gpus(self) -> int:
        return sum(p.gpus for p in self.pools)

    @property
    def mode(self) -> str:
        roles = {p.role for p in self.pools}
        if "aggregated" in roles:
            return "aggregated"
        return "disaggregated" if roles == {"prefill", "decode"} else next(iter(roles))

    @property
    def same_domain(self) -> bool:
        """All GPUs inside one NVLink domain (KV moves over NVLink, not the NIC)."""
        return self.gpus <= self.hardware.scaleup.domain_gpus

    def of(self, role: str) -> list[Pool]:
        return [p for p in self.pools if p.role == role]

    def first(self, role: str) -> Pool | None:
        return next((p for p in self.pools if p.role == role), None)

    def resized(self, counts: dict[str, int]) -> Deployment:
        """The same pools with the first pool of each named role at a new instance count."""
        done: set[str] = set()
        pools = []
        for p in self.pools:
            if p.role in counts and p.role not in done:
                pools.append(replace(p, instances=counts[p.role]))
                done.add(p.role)
            else:
                pools.append(p)
        return Deployment(self.engine, tuple(pools))

    def without_serving_path(self) -> Deployment:
        """The same deployment driven in process (a benchmark harness calling the engine, no HTTP
        server or per-request tokenization in between): every pool's request_overhead_s is 0."""
        pools = tuple(
            replace(
                p,
                instance=p.instance.model_copy(
                    update={"runtime": p.instance.runtime.model_copy(update={"request_overhead_s": 0.0})}
                ),
            )
            for p in self.pools
        )
        return Deployment(self.engine, pools)

    def describe(self, offloaded: Collection[str] = ()) -> str:
        """The pools' layouts; `offloaded`: the roles whose memory plan streams weights from host memory
        (`MemoryPlan.offloaded_bytes`), marked 'host-offload'."""

        def pool(p: Pool) -> str:
            role = "agg" if p.role == "aggregated" else p.role
            return f"{p.instances}x {role} {layout_label(p.parallel)}" + (
                " host-offload" if p.role in offloaded else ""
            )

        return " + ".join(pool(p) for p in self.pools)

    def label(self, batch: int | None = None, offloaded: Collection[str] = ()) -> str:
        """The one label of an operating point: layout (host weight offload marked), precision
        (attention/KV/dense/experts), MTP, decode batch per instance and KV memory fraction, so two
        points that differ in any of them read differently (Pareto fronts, compare, chart hovers, the
        dashboard)."""
        main = self.first("decode") or self.first("aggregated") or self.pools[0]
        inst = main.instance
        moe = inst.model.moe is not None
        parts = [self.describe(offloaded), precision_label(inst.precision, moe), "MTP" if inst.mtp else "no MTP"]
        if batch is not None:
            parts.append(f"batch {batch}")
        parts.append(f"mem fraction {inst.runtime.mem_fraction:g}")
        return ", ".join(parts)


def make_pool(
    engine: str,
    role: str,
    instances: int,
    parallel: Parallelism,
    model: ModelSpec,
    hw: HardwareSpec,
    precision: PrecisionMix,
    mtp: MTPConfig | None,
    stated_runtime: dict[str, object] | None = None,
    note: list[str] | None = None,
    isl: int | None = None,
) -> Pool:
    """One pool with the engine's runtime options for it (planner.engines.runtime_options); a
    prefill pool never drafts MTP tokens. Raises pydantic/DeploymentError for layouts that do not
    fit the model or the hardware."""
    rt = runtime_options(engine, role, parallel, hw, stated_runtime, note, isl)
    inst = InstanceSpec(
        model=model,
        hardware=hw,
        parallel=parallel,
        precision=precision,
        runtime=rt,
        mtp=mtp if role != "prefill" else None,
    )
    return Pool(role, instances, inst)


def pairs_in_nodes(hw: HardwareSpec, n_pre: int, pre_gpus: int, n_dec: int, dec_gpus: int) -> bool:
    """Whether `n_pre` prefill instances of `pre_gpus` GPUs and `n_dec` decode instances of `dec_gpus` can share
    nodes so that every node holding one role also holds the other (KV moves only inside a node): some k nodes,
    each with at least one of both, the instances spread as evenly as they go (a sufficient packing). Always
    true where the catalog gives the system a network."""
    if hw.nic_gbps_per_gpu > 0 or n_pre == 0 or n_dec == 0:
        return True
    node = hw.gpus_per_node
    return any(
        math.ceil(n_pre / k) * pre_gpus + math.ceil(n_dec / k) * dec_gpus <= node
        for k in range(1, min(n_pre, n_dec) + 1)
    )


def check_hand_off(dep: Deployment) -> None:
    """A disaggregated deployment on a system with no network between its nodes (no NIC in the catalog) hands
    each request's KV cache from prefill to decode inside a node, so its instances must share nodes, each node
    with both roles (`pairs_in_nodes`; every pool of a role counted, at its largest instance); elsewhere the NIC
    carries it (roofline.comm.kv_transfer_time)."""
    pre, dec = dep.of("prefill"), dep.of("decode")
    if not pre or not dec:
        return
    hw = dep.hardware
    n_pre, n_dec = sum(p.instances for p in pre), sum(p.instances for p in dec)
    g_pre, g_dec = max(p.gpus_per_instance for p in pre), max(p.gpus_per_instance for p in dec)
    if not pairs_in_nodes(hw, n_pre, g_pre, n_dec, g_dec):
        raise NoNetworkError(
            f"{n_pre} prefill instances of {g_pre} GPUs and {n_dec} decode instances of {g_dec} cannot share "
            f"{hw.id}'s {hw.gpus_per_node}-GPU nodes so that each node holds both, and {hw.id} has no network between "
            "its nodes (catalog nic_gbps_per_gpu: 0) for the KV hand-off"
        )
