"""Calibration: turns measurements and published profiles into the efficiencies `roofline/` uses.

Writes or derives data only; the simulator never imports it. `seed003` re-derives the two
sm_120 fallback-kernel constants from the seed-003 GPU profile.
"""
