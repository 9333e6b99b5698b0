"""Collective communication times: EP dispatch/combine all-to-all, TP all-reduce, KV transfer.

Each is latency + bytes / (link bandwidth x efficiency). Links: the NVLink domain (8 GPUs on
HGX, 72 on NVL72) at its per-direction bandwidth; beyond it RDMA at the NIC rate; PCIe for
systems without NVLink (RTX PRO 6000). The efficiencies are priors with sources below; a fitted
multi-GPU profile (`calibration.comm_fit` -> roofline/calibrated/<hw id>-comm.json) replaces the
NVLink ones for its architecture, as the kernel tables do. sm_90 has one, measured on two H200s
joined by NVLink (world 2): larger worlds and other sm_90 GPUs use it transferred, and say so.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources

from roofline.catalog.schema import HardwareSpec


@dataclass(frozen=True, slots=True)
class LinkPrior:
    efficiency: float
    latency_s: float
    source: str


# DeepEP V1 intranode 153-158 GB/s of ~160 on H800; DeepEP V2 EP8 726-740 GB/s of 900 on B200
# with 64 SMs (~0.8); Hybrid-EP doc: DeepEP 554 GB/s FP8 dispatch at 48 SMs on GB200 (0.62).
A2A_NVLINK = {
    "sm_90": LinkPrior(0.80, 12e-6, "DeepEP V1 legacy.md intranode ~96% of achievable, ~80% of 450 GB/s"),
    "sm_100": LinkPrior(0.62, 15e-6, "Hybrid-EP README: DeepEP 554 GB/s FP8 dispatch on GB200 (48 SMs)"),
}
# DeepEP V1 internode normal 43-58 GB/s "logical" on 400G CX7 (~50 GB/s); LL mode EP8 dispatch
# of 128 tokens x top-8 in 77 us.
A2A_RDMA = LinkPrior(0.80, 40e-6, "DeepEP legacy.md: internode 43-58 GB/s per 400G NIC; LL dispatch 77-194 us")
# NCCL all-reduce busbw: H100 330 (NVLS off) of 450 GB/s; GB200 NVL72 835-847 of 900 GB/s.
ALLREDUCE_NVLINK = {
    "sm_90": LinkPrior(0.73, 8e-6, "NVIDIA/nccl #1374/#1221: H100 all-reduce busbw 330 GB/s, NVLS off"),
    "sm_100": LinkPrior(0.85, 8e-6, "coreweave/nccl-tests PR #43: GB200 NVL72 busbw 835-847 GB/s"),
}
# All-reduce across HGX nodes (one 400G NIC per GPU; `allreduce_time`): NVIDIA/nccl #2409 expects
# ~470 GB/s busbw on 2 x 8 H100 with 8 x 400G ("cf. nccl-tests #309 results") and measures 216-231 GB/s
# on a RoCE fabric it reports as degraded; nccl-tests #290: 46-48 GB/s per 400G NIC. The model's
# 8 NICs x 50 GB/s x 0.80 = 320 GB/s sits between.
# The serving engines' own one-shot/two-shot all-reduce over NVLink peer buffers, used for TP
# messages up to the engine's limit (RuntimeOptions.custom_allreduce_max_bytes): latency and an
# efficiency on the ring's wire bytes, fitted to SGLang PR #2904's H100 table of its custom
# all-reduce (TP 2/4/8, 512 B-1 MB, 18 points: median |error| 12%, worst 32%).
CUSTOM_ALLREDUCE = LinkPrior(
    0.126,
    4.3e-6,
    "SGLang PR #2904 H100 custom all-reduce table (TP 2/4/8, 512 B-1 MB): 4.3 us + wire / (0.126 x NVLink)",
)
CUSTOM_ALLREDUCE_WORLDS = (2, 4, 6, 8)  # vLLM/SGLang CustomAllreduce._SUPPORTED_WORLD_SIZES
# PCIe Gen5 x16 between RTX PRO 6000s through the host: seed 003 measured communication at ~2%
# of a decode step; NCCL over PCIe without the LL tuning block.
PCIE = LinkPrior(
    0.50,
    30e-6,
    "PCIe Gen5 x16 (64 GB/s per direction) through the root complex; "
    "NCCL small-message latency ~30 us without NCCL_PROTO=LL (seed 003)",
)


def _arch(hw: HardwareSpec) -> str:
    return "sm_100" if hw.arch in ("sm_100", "sm_103") else "sm_90"


MEASURED = {"sm_90": "h200-sxm"}  # architecture -> catalog id of the hardware whose comm profile it uses
CALIBRATED = resources.files("roofline") / "calibrated"  # where calibration.comm_fit writes <id>-comm.json


@cache
def _fitted(hardware: str) -> dict[str, dict[str, dict[str, float]]]:
    path = CALIBRATED / f"{hardware}-comm.json"
    return json.loads(path.read_text())["fit"] if path.is_file() else {}


def link(hw: HardwareSpec, kind: str, ranks: int, prior: LinkPrior) -> LinkPrior:
    """The measured NVLink efficiency and latency for `kind` (a2a, allreduce, kv) at the largest
    measured world size not above `ranks`, where this architecture has a comm profile; else `prior`."""
    source = MEASURED.get(hw.arch)
    fit = _fitted(source).get(kind, {}) if source else {}
    if not fit:
        return prior
    worlds = sorted(int(w) for w in fit)
    w = max((x for x in worlds if x <= ranks), default=worlds[0])
    f = fit[str(w)]
    where = f"measured on {source} at world {w}"
    if ranks != w:
        where += f", transferred to world {ranks}"
    if hw.id != source:
        where += f", transferred to {hw.id}"
    return LinkPrior(f["efficiency"], f["latency_s"], where)


def ep_copies(hw: HardwareSpec, ep: int, top_k: int, node_limit: int, normal_mode: bool) -> tuple[float, float]:
    """Expected copies of one token's hidden state sent (over NVLink/PCIe, over RDMA) by an EP
    dispatch; combine mirrors it.

    Destinations are uniform over the ep ranks. Within the NVLink domain, normal (prefill) kernels
    send a token once per remote rank that holds any of its experts (DeepEP `get_dispatch_layout`:
    `is_token_in_rank`; runtime.comm does the same): (ep-1)(1-(1-1/ep)^top_k) copies; low-latency
    (decode) kernels send one copy per remote expert: top_k (1-1/ep). Beyond the domain, DeepEP's
    normal (prefill) kernels send one RDMA copy per
    destination node and fan out over NVLink, and node-limited routing caps the nodes a token
    reaches (DeepSeek-V3 report: at most 4); low-latency (decode) kernels send one RDMA copy
    per remote expert (DeepEP README)."""
    domain = max(hw.scaleup.domain_gpus, 1)
    if ep <= domain:
        if normal_mode:
            return (ep - 1) * (1 - (1 - 1 / ep) ** top_k), 0.0
        return top_k * (1 - 1 / ep), 0.0
    nodes = ep / domain
    if normal_mode:
        distinct = min(nodes * (1 - (1 - 1 / nodes) ** top_k), float(node_limit))
        return top_k * (1 - 1 / ep), distinct * (1 - 1 / nodes)
    local = domain / ep
    return top_k * (local - 1 / ep), top_k * (1 - local)


def alltoall_time(hw: HardwareSpec, ep: int, nv_bytes: float, rdma_bytes: float, launches: int = 1) -> float:
    """One dispatch or combine moving `nv_bytes` over NVLink (or PCIe) and `rdma_bytes` over the
    NIC per GPU; the two paths run concurrently and the slower bounds the operation."""
    if ep <= 1 or nv_bytes + rdma_bytes <= 0:
        return 0.0
    if hw.scaleup.domain_gpus <= 1:  # PCIe-only system
        total = nv_bytes + rdma_bytes
        return launches * PCIE.latency_s + total / (hw.pcie_gbps_unidir * 1e9 * PCIE.efficiency)
    nv = link(hw, "a2a", ep, A2A_NVLINK[_arch(hw)])
    t_nv = nv_bytes / (hw.scaleup.bw_gbps_unidir * 1e9 * nv.efficiency)
    if rdma_bytes <= 0:
        return launches * nv.latency_s + t_nv
    t_rdma = rdma_bytes / (hw.nic_bytes_per_s * A2A_RDMA.efficiency)
    return launches * A2A_RDMA.latency_s + max(t_rdma, t_nv)


def allreduce_time(
    hw: HardwareSpec, ranks: int, bytes_per_gpu: float, launches: int = 1, custom_max_bytes: int = 0
) -> float:
    """Ring all-reduce of `bytes_per_gpu` over `ranks` GPUs: 2(n-1)/n of the buffer crosses each link.
    Within an NVLink domain, messages up to `custom_max_bytes` may take the engine's custom
    all-reduce (CUSTOM_ALLREDUCE), whichever of the two is faster, as the engines choose by size."""
    if ranks <= 1 or bytes_per_gpu <= 0:
        return 0.0
    wire = 2.0 * (ranks - 1) / ranks * bytes_per_gpu
    if hw.scaleup.domain_gpus <= 1:
        return launches * PCIE.latency_s + wire / (hw.pcie_gbps_unidir * 1e9 * PCIE.efficiency)
    bw = hw.scaleup.bw_gbps_unidir * 1e9
    if ranks > hw.scaleup.domain_gpus:
        # Across nodes NCCL runs a channel per NIC (one NIC per GPU), so a node's share of the ring's
        # traffic spreads over all its GPUs' NICs while the hops inside the node stay on NVLink: the bus
        # bandwidth is the lower of the node's NICs together and its NVLink (sources above). It had
        # been one GPU's NIC, 8x too slow for a TP16 across two HGX nodes.
        nodes = math.ceil(ranks / hw.scaleup.domain_gpus)  # filled in order (TP12 on 8-GPU nodes: 8 + 4, the 4 bind)
        per_node = ranks - (nodes - 1) * hw.scaleup.domain_gpus
        ar = link(hw, "allreduce", int(per_node), ALLREDUCE_NVLINK[_arch(hw)])
        busbw = min(per_node * hw.nic_bytes_per_s * A2A_RDMA.efficiency, bw * ar.efficiency)
        return launches * A2A_RDMA.latency_s + wire / busbw
    ar = link(hw, "allreduce", ranks, ALLREDUCE_NVLINK[_arch(hw)])
    nccl = launches * ar.latency_s + wire / (bw * ar.efficiency)
    if bytes_per_gpu > custom_max_bytes or ranks not in CUSTOM_ALLREDUCE_WORLDS:
        return nccl
    return min(nccl, launches * CUSTOM_ALLREDUCE.latency_s + wire / (bw * CUSTOM_ALLREDUCE.efficiency))


def kv_transfer_time(src: HardwareSpec, same_domain: bool, kv_bytes: float) -> float:
    """Prefill -> decode KV transfer of one request (NIXL/Mooncake style, one stream)."""
    if kv_bytes <= 0:
        return 0.0
    if same_domain and src.scaleup.domain_gpus > 1:
        nv = link(src, "kv", 2, A2A_NVLINK[_arch(src)])
        return nv.latency_s + kv_bytes / (src.scaleup.bw_gbps_unidir * 1e9 * nv.efficiency)
    if src.scaleup.domain_gpus <= 1:
        return PCIE.latency_s + kv_bytes / (src.pcie_gbps_unidir * 1e9 * PCIE.efficiency)
    return A2A_RDMA.latency_s + kv_bytes / (src.nic_bytes_per_s * A2A_RDMA.efficiency)
