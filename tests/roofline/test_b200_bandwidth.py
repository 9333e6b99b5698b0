"""B200 memory bandwidth as the driver reports it (7680-bit bus), not the marketed 8 TB/s."""

from __future__ import annotations

import pytest

from roofline.catalog import get_hardware


def test_b200_bandwidth_is_its_7680_bit_bus_at_3996_mhz():
    """pytorch/ao PR #4002: cudaDeviceProp.memoryBusWidth 7680 bits, nvidia-smi max memory clock
    3996 MHz, double data rate: 7680 / 8 x 3996e6 x 2 = 7.672 TB/s."""
    assert get_hardware("b200").mem_bw == pytest.approx(7680 / 8 * 3996e6 * 2, rel=1e-3)
