"""The measured window's settings: a warm-up and a cool-down that leave requests to measure."""

from __future__ import annotations

import pytest

from simulator import SimConfig


def test_warmup_and_cooldown_must_leave_a_window():
    with pytest.raises(ValueError, match="must be below 1"):
        SimConfig(warmup_fraction=0.5, cooldown_fraction=0.5)


def test_a_cooldown_needs_a_window_measured_by_arrival():
    """Review (fourteenth session): with warmup_by completion the cool-down was silently ignored."""
    with pytest.raises(ValueError, match="cooldown_fraction applies to warmup_by: arrival"):
        SimConfig(cooldown_fraction=0.2, warmup_by="completion")
