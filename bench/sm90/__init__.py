"""``python -m bench.sm90_gemm``'s parts: the shared GEMM helpers (``gemm``), the table rows
(``variants``), printing and alternating (``report``), the flag parsers (``args``), and one module
per benchmark mode."""
