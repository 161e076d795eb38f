"""SOL Cockpit's headless engine.

Importing this package is cheap and side-effect free: it never loads textual, cupy or pynvml.
The CUDA backend (``engine.backends.cuda``) is the only module that imports cupy, and the NVML
sampler (``engine.nvml``) the only one that imports pynvml; both are imported on demand.
"""

__version__ = "0.1.0"
