"""Which user-kernel reference files the user has trusted to run: their content hashes.

A reference file is Python (``kernels.user_reference``); it runs only after the user said so with
``--trust-reference``, which records the sha256 of the content read then, with the path it had, in
``<config dir>/trusted-references.json`` (0600). A changed file has another hash and is not trusted
until the user trusts it again. The record is read in the caller (to refuse before anything runs)
and in the engine process (which runs only the trusted text it read).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.errors import InputError
from engine.paths import config_dir, private_dir
from engine.safe_files import read_text, write_atomic

MAX_RECORD_BYTES = 1 * 2**20
MAX_ENTRIES = 1000
"""The oldest trust is dropped past this many (a record is a few hundred bytes)."""


def record_path() -> Path:
    return config_dir() / "trusted-references.json"


def _load() -> dict[str, str]:
    path = record_path()
    if not path.exists():
        return {}
    try:
        doc: Any = json.loads(read_text(path, "trusted references", MAX_RECORD_BYTES))
    except (InputError, ValueError):
        return {}  # a damaged record trusts nothing; the next --trust-reference rewrites it
    entries = doc.get("sha256") if isinstance(doc, dict) else None
    if not isinstance(entries, dict):
        return {}
    return {k: v for k, v in entries.items() if isinstance(k, str) and isinstance(v, str)}


def is_trusted(sha256: str | None) -> bool:
    """Whether content with this hash was trusted."""
    return sha256 is not None and sha256 in _load()


def trust(sha256: str, path: Path) -> None:
    """Record that the content with this hash (now at ``path``) may run."""
    entries = _load()
    entries.pop(sha256, None)
    entries[sha256] = str(path)
    kept = dict(list(entries.items())[-MAX_ENTRIES:])
    private_dir(record_path().parent)
    write_atomic(record_path(), json.dumps({"sha256": kept}, indent=1) + "\n")
