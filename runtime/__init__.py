"""Real GPU kernels (torch, flashinfer) that produce calibration data; the only package that
imports them (install extra `runtime`).

Not built yet: it arrives with the runtime-calibration issue. Nothing here today.
"""
