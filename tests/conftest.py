"""Shared fixtures: every test gets its own store, config and cache dirs, and a fast sim device."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("SOL_COCKPIT_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("SOL_COCKPIT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SOL_COCKPIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SOL_COCKPIT_STORE", str(tmp_path / "data" / "results.sqlite"))
    monkeypatch.setenv("SOL_SIM_DELAY", "0")
    monkeypatch.delenv("BLOCK_SIZE", raising=False)
    monkeypatch.delenv("MEMORY_PIPELINING", raising=False)


def gpu_available() -> bool:
    try:
        from engine import nvml

        ok, _, _ = nvml.probe()
        import importlib.util

        return ok and importlib.util.find_spec("cupy") is not None
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="no NVIDIA GPU with a working driver and CuPy here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
