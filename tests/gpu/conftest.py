"""The GPU suite's fixtures: the CUDA context guard (see ``cuda_guard``)."""

from tests.gpu.cuda_guard import _cuda_context_guard  # noqa: F401  (an autouse fixture, registered by import)
