#!/usr/bin/env bash
# Second call on the two-H200 machine: the disaggregated engine (prefill GPU 0, decode GPU 1) on
# the closed-loop workloads with its decode worker reporting where each burst's step time went,
# then the EP2 engine with the peer-to-peer dispatch (runtime.comm_p2p) on the first workloads
# (EP_ARGS). Writes under $OUT; everything ends by DEADLINE_S (default 570 s) after the start.
# NVLink multicast stays off in this shell and every child (KINDS.md: it can take the host's GPUs down).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 MAX_JOBS=16
timeout "${PD_TIMEOUT_S:-330}" python3 -m runtime.engine.pd_run --out "$OUT/pd" ${PD_ARGS:-} 2>&1 | grep -v Warning | tail -40
echo "pd rc ${PIPESTATUS[0]}"
timeout $(( ${DEADLINE_S:-570} - SECONDS )) python3 -m runtime.engine.ep_run --world 2 --dispatch p2p --out "$OUT/ep2p2p" ${EP_ARGS:---quick} 2>&1 | grep -v Warning | tail -8
echo "ep p2p rc ${PIPESTATUS[0]}"
