"""A small continuous-batching serving engine on real kernels (one GPU): `runtime.engine.serve`.
It exists to check that the simulator predicts a real serving loop, not to be a product engine."""
