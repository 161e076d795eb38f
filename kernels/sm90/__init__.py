"""The Hopper path of gemm_residual, by concern: ``tiles`` (tile tables, dtypes, parsing), ``smem``
(shared memory and the stage options), ``model`` (the schedule cost model), ``choices`` (the
per-build choices that are not knobs), ``defaults`` (the default knobs), ``constants`` (the kernel's
compile-time constants), ``planner`` (``Sm90Plan``, ``plan``, ``check``) and ``codegen`` (the source
and launches of a plan); ``kernels.gemm_residual_auto`` plans and renders through them. Beside them,
the kernel's CUDA parts (``.cuh``), each a header that compiles alone with its inputs as arguments:
the configuration, PTX, wgmma, epilogue-buffer and scheduler headers, what the kernel hands its
warpgroups (``params``), the producer (``producer``), one consumer header per schedule
(``consumer_cooperative``, ``consumer_pingpong``) and the parts both consumers call (``mainloop``,
``streamk_fixup``, ``epilogue_write``, ``epilogue_store``); kernels/gemm_residual_sm90.cu's header
says which holds what."""
