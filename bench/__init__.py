"""GPU bench scripts and measurement tools, run from the repository root as modules:
``python -m bench.NAME`` (each imports the project as a package, never by editing ``sys.path``).
The tools that write or guard product data are in ``bench.product_data``. A module here plans
through the kernel spec and reaches the GPU through ``engine``'s exports, never ``engine.backends``
or a kernel path's internals (``tests/unit/test_bench_public_api.py``, whose ``NOT_YET`` lists the
research probes still to move)."""
