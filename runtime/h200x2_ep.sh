#!/usr/bin/env bash
# One call on the two-H200 machine (kind nvidia-h200-x2): the world-2 communication sweep (NCCL
# fixed-capacity path and the peer-to-peer NVLink path, each checked against the host-split
# reference), the single-GPU engine at C=1 on this host (the control for the PD engine's decode
# and prefill times, which were measured on this machine kind), then the EP2 engine (DP attention
# + EP over both GPUs) on the closed-loop workloads. Writes under $OUT.
# Everything ends by DEADLINE_S (default 570 s) after the start, inside one 600-s call.
# NVLink multicast stays off in this shell and every child (KINDS.md: it can take the host's GPUs down).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 MAX_JOBS=16
lscpu | grep -i "model name"
nvidia-smi --query-gpu=index,name,power.limit,power.max_limit,clocks.max.sm,clocks.sm,clocks.max.mem,clocks.mem,pstate,temperature.gpu --format=csv
timeout 150 python3 -m runtime.comm_sweep --worlds 2 --out "$OUT/comm_profile.json" 2>&1 | grep -v Warning | tail -5
echo "comm sweep rc ${PIPESTATUS[0]}"
timeout 120 python3 -m runtime.engine.ep_profile "$OUT/ep_profile.json" --world 2 2>&1 | grep -v Warning | tail -2
CUDA_VISIBLE_DEVICES=1 timeout 150 python3 -m runtime.engine.run --workloads 1 --out "$OUT/single" 2>&1 | grep -v Warning | tail -3
echo "single rc ${PIPESTATUS[0]}"
timeout $(( ${DEADLINE_S:-570} - SECONDS )) python3 -m runtime.engine.ep_run --world 2 --out "$OUT/ep2" ${EP_ARGS:-} 2>&1 | grep -v Warning | tail -12
echo "ep rc ${PIPESTATUS[0]}"
