"""Backends: ``cuda`` (CuPy; with its ``cuda_*`` modules, all that imports cupy) and ``sim`` (the
simulated device).

Both run a task through the same stages and return the same RunResult; everything the simulated
backend produces carries ``simulated = True``."""
