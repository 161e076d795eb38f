"""`tui inspect`: a C++/CUDA binary checked before it runs.

Which GPU architectures its device code targets (SASS and PTX, read from the fat binary headers
in the ELF file, no CUDA toolkit needed), whether the GPU (or a profile's) can run it and which
rebuild fixes it if not, which shared libraries are missing and where they are, its CUDA runtime
against the driver, and optionally a smoke run diagnosed with the troubleshooting rules.
"""

from engine.binary_inspect.model import Finding, Report, Target
from engine.binary_inspect.report import inspect_binary, resolve_target

__all__ = ["Finding", "Report", "Target", "inspect_binary", "resolve_target"]
