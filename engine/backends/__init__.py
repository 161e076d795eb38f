"""Backends: ``cuda`` (CuPy, the only module importing cupy) and ``sim`` (the simulated device).

Both run a task through the same stages and return the same RunResult; everything the simulated
backend produces carries ``simulated = True``."""
