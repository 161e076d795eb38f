"""Fakes for the check context: an NVML that answers what it is told and an in-memory filesystem.
The tests use them to cover every status of every check without a GPU; they also let an operator
rehearse what `tui check` says on a described machine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class FakeDevice:
    """What NVML's device_info() reports for one GPU."""

    index: int
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str | None = "GPU-8c3b0f1e-0000-0000-0000-000000000000"
    compute_capability: str | None = "9.0"
    pci_bus_id: str | None = "00000000:18:00.0"
    memory_total_mib: float | None = 81559.0
    power_limit_w: float | None = 700.0
    sm_count: int | None = 132


@dataclass
class FakeNvml:
    """An NVML facade: ``ok`` False with a ``problem`` imitates engine.nvml's init failures; the
    health answers live in ``answers[query][gpu index]`` (missing = None = not supported)."""

    ok: bool = True
    problem: str | None = None
    driver: str | None = "580.65.06"
    cuda: str | None = "13.0"
    devs: list[FakeDevice] = field(default_factory=lambda: [FakeDevice(0)])
    answers: dict[str, dict[int, Any]] = field(default_factory=dict)

    def status(self) -> tuple[bool, str | None, str | None]:
        return self.ok, self.problem, None if self.ok else "a fix"

    def driver_version(self) -> str | None:
        return self.driver if self.ok else None

    def cuda_driver_version(self) -> str | None:
        return self.cuda if self.ok else None

    def devices(self) -> list[FakeDevice]:
        return list(self.devs) if self.ok else []

    def device_count(self) -> int:
        return len(self.devices())

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda index=0, *_: self.answers.get(name, {}).get(index)


@dataclass
class MemoryFS:
    """Files and folders held in dicts: ``files`` path -> text, ``dirs`` path -> entry names."""

    files: dict[str, str] = field(default_factory=dict)
    dirs: dict[str, list[str]] = field(default_factory=dict)

    def read_text(self, path: str) -> str | None:
        return self.files.get(path)

    def listdir(self, path: str) -> list[str] | None:
        return sorted(self.dirs[path]) if path in self.dirs else None

    def exists(self, path: str) -> bool:
        return path in self.files or path in self.dirs
