"""Devices: ``cuda`` (CuPy; with its ``cuda_*`` modules, all that imports cupy) and ``sim`` (the
simulated device), both behind ``device.Device``; the stage skeleton every job composes is
``stages``.

Both take a job through the same stages and produce the same results; everything the simulated
device produces carries ``simulated = True``."""
