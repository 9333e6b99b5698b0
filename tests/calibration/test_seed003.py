"""The sm_120 fallback constants in the kernel table are exactly what the seed-003 fit derives."""

from __future__ import annotations

import pytest

from calibration.seed003 import fit
from roofline.kernels import KERNELS


def test_kernel_table_holds_the_fitted_sm120_fallback_efficiencies():
    f = fit()
    assert KERNELS["triton-sparse-mla-sm120"].compute_eff == pytest.approx(f["sparse_mla_compute_eff"], rel=0.01)
    assert KERNELS["triton-mxfp4-slot-gemv-sm120"].memory_eff == pytest.approx(f["slot_gemv_memory_eff"], rel=0.01)
