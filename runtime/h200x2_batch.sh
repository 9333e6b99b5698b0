#!/usr/bin/env bash
# One call on the two-H200 machine (kind nvidia-h200-x2), so machine start-up and JIT builds are
# paid once: communication sweep at world 2, decode GEMMs back to back, and (on the CPUs, beside
# the GEMMs) the compile-only Blackwell build check. Writes everything under $OUT.
# NVLink multicast stays off in this shell and every child (KINDS.md: it can take the host's GPUs down).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.device_count(), torch.cuda.nccl.version(), torch.cuda.get_arch_list())"
timeout 300 python3 -m runtime.comm_sweep --worlds 2 --out "$OUT/comm_profile.json"
echo "comm sweep rc $?"
MAX_JOBS=16 timeout 420 python3 -m runtime.build_check --out "$OUT/blackwell_builds.json" --deadline-s "${BUILD_DEADLINE_S:-300}" > "$OUT/build_check.log" 2>&1 &
build=$!
timeout 300 python3 -m runtime.warm_gemm --out "$OUT/warm_gemm.json"
echo "warm gemm rc $?"
wait $build
echo "build check rc $?"
tail -12 "$OUT/build_check.log"
