"""Tools whose output is product data or guards it, apart from the one-off probes of ``bench/``:

- ``tuned_defaults``: writes a profile's table of tuned defaults, ``profiles/tuned/<profile>.toml``
  (read by ``engine.tuned_defaults``), from `tui tune --json` runs.
- ``fit_prior``: fits the tuner prior's stream-K tail, ``STREAMK_TAIL`` in
  ``kernels/gemm_residual_cost.py``, to stored tune runs (``docs/data/``), and says how well the
  prior predicts them.
- ``build_hashes``: fingerprints every build the product renders (or its cubins), to show that a
  refactor changed no kernel (``--out`` before, ``--compare`` after).
- ``cubin_sample``: the cubin digests of a fixed sample of Hopper and decode builds, the quick form
  of ``build_hashes --cubins``.

Each runs from the repository root as ``python -m bench.product_data.NAME`` and uses only the
engine's and the kernels' public API (``tests/unit/test_bench_public_api.py``)."""
