"""GPU bench scripts and measurement tools, run from the repository root as modules:
``python -m bench.NAME`` (each imports the project as a package, never by editing ``sys.path``)."""
