"""Where the cockpit keeps its files: platform dirs, overridable by environment variables.

SOL_COCKPIT_CONFIG_DIR   user profiles and settings  (default: platformdirs user config dir)
SOL_COCKPIT_DATA_DIR     results store, checklist    (default: platformdirs user data dir)
SOL_COCKPIT_CACHE_DIR    compiled-kernel cache       (default: platformdirs user cache dir)
"""

from __future__ import annotations

import os
from pathlib import Path

APP = "sol-cockpit"


def _dir(env: str, kind: str) -> Path:
    override = os.environ.get(env, "").strip()
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(getattr(platformdirs, f"user_{kind}_dir")(APP, appauthor=False))


def config_dir() -> Path:
    return _dir("SOL_COCKPIT_CONFIG_DIR", "config")


def data_dir() -> Path:
    return _dir("SOL_COCKPIT_DATA_DIR", "data")


def cache_dir() -> Path:
    return _dir("SOL_COCKPIT_CACHE_DIR", "cache")


def store_path() -> Path:
    override = os.environ.get("SOL_COCKPIT_STORE", "").strip()
    return Path(override).expanduser() if override else data_dir() / "results.sqlite"


def private_dir(path: Path) -> Path:
    """Create ``path`` and any missing parents as folders only the user can enter (0700, whatever
    the umask: they hold runs that record host and GPU identities). Existing folders are left as
    they are."""
    path = Path(path)
    missing = []
    p = path
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:
            continue
        os.chmod(d, 0o700)
    return path
