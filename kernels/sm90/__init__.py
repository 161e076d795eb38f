"""The Hopper path of gemm_residual, by concern: ``tiles`` (tile tables, dtypes, parsing), ``smem``
(shared memory and the stage options), ``model`` (the schedule cost model), ``choices`` (the
per-build choices that are not knobs), ``defaults`` (the default knobs), ``constants`` (the kernel's
compile-time constants), ``planner`` (``Sm90Plan``, ``plan``, ``check``) and ``codegen`` (the source
and launches of a plan). ``kernels.gemm_residual_sm90`` re-exports them as one module."""
