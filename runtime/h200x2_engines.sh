#!/usr/bin/env bash
# One call on the two-H200 machine: the world-2 communication sweep (runtime.comm's device-side EP
# path, CUDA-graph timed, checked against the host-split reference), then the disaggregated engine
# (prefill on GPU 0, decode on GPU 1) on the closed-loop workloads. Writes under $OUT.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 MAX_JOBS=16
nvidia-smi topo -m | head -3
timeout 150 python3 -m runtime.comm_sweep --worlds 2 --out "$OUT/comm_profile.json" 2>&1 | grep -v Warning
echo "comm sweep rc ${PIPESTATUS[0]}"
timeout "${PD_TIMEOUT_S:-420}" python3 -m runtime.engine.pd_run --out "$OUT/pd" ${PD_ARGS:-} 2>&1 | grep -v Warning
echo "pd rc ${PIPESTATUS[0]}"
