"""The cockpit's preferences (theme, profile, last task, last screen): a small TOML file in the
user's config dir, read at start (``engine.read_text``: a regular file of at most ``MAX_BYTES``) and
written when the cockpit quits (``engine.write_atomic``: a temporary file then a rename, never
through a link). A file that cannot be read is reported and left untouched for the whole session."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from engine import InputError, read_text, write_atomic

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FILE_NAME = "cockpit.toml"
HEADER = ("# SOL Cockpit preferences, written by the cockpit when it quits (tui/README-cockpit.md).\n"
          "# The command line wins over these; delete the file to go back to the defaults.\n")
MAX_BYTES = 2**20
"""The largest preferences file read (it is a few hundred bytes)."""
KEYS = {"theme": str, "profile": str, "screen": str, "task": dict}
"""Every key the file may hold and its TOML type; other keys are kept as they are."""


def config_dir() -> Path:
    """SOL_COCKPIT_CONFIG_DIR, else platformdirs' user config dir: the engine's ``config_dir`` once
    ``engine`` exports it, the same rule spelled out here until then."""
    import engine

    exported = getattr(engine, "config_dir", None)
    if exported is not None:
        return Path(exported())
    override = os.environ.get("SOL_COCKPIT_CONFIG_DIR", "").strip()
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir("sol-cockpit", appauthor=False))


def default_path() -> Path:
    return config_dir() / FILE_NAME


@dataclass
class Preferences:
    """What the cockpit remembers between sessions; None: not set (the default applies)."""

    theme: str | None = None
    """'dark' or 'light'."""
    profile: str | None = None
    """A profile name; None: detect it from the device."""
    screen: str | None = None
    """The screen shown when the cockpit quit (a mode name such as 'run')."""
    task: dict[str, Any] | None = None
    """The last valid task, as a task file holds it (without the backend and fault injection)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Keys this version does not know, written back unchanged."""

    def to_toml(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: v for k, v in (("theme", self.theme), ("profile", self.profile),
                                                ("screen", self.screen)) if v is not None}
        out.update(self.extra)
        if self.task:
            out["task"] = self.task
        return out


@dataclass
class PreferencesFile:
    """The file, what was read from it, and whether it may be written (not when it was malformed)."""

    path: Path
    prefs: Preferences = field(default_factory=Preferences)
    problem: str | None = None
    """Why the file could not be used (shown at start); None when it was fine or absent."""

    @property
    def writable(self) -> bool:
        return self.problem is None

    @classmethod
    def load(cls, path: Path | None = None, allowed: dict[str, tuple[str, ...]] | None = None) -> PreferencesFile:
        """Read ``path`` (default: the config dir's file). ``allowed``: the values a key may take."""
        path = Path(path) if path is not None else default_path()
        try:
            data = tomllib.loads(read_text(path, "preferences", MAX_BYTES))
        except InputError as exc:
            if not os.path.lexists(path):
                return cls(path)
            return cls(path, problem=f"{exc.message}; it is left as it is.")
        except tomllib.TOMLDecodeError as exc:
            return cls(path, problem=f"{path}: not valid TOML ({exc}); it is left as it is and not written "
                                     "this session. Fix or delete it.")
        for key, typ in KEYS.items():
            if key in data and not isinstance(data[key], typ):
                return cls(path, problem=f"{path}: {key} must be a {'table' if typ is dict else 'string'}, not "
                                         f"{data[key]!r}; the file is left as it is. Fix or delete it.")
        for key, values in (allowed or {}).items():
            if key in data and data[key] not in values:
                return cls(path, problem=f"{path}: {key}={data[key]!r} is not one of {', '.join(values)}; "
                                         "the file is left as it is. Fix or delete it.")
        extra = {k: v for k, v in data.items() if k not in KEYS}
        return cls(path, Preferences(theme=data.get("theme"), profile=data.get("profile"),
                                     screen=data.get("screen"), task=data.get("task"), extra=extra))

    def save(self, prefs: Preferences) -> str | None:
        """Write ``prefs`` atomically; returns why not (a malformed file, an OS error) or None."""
        if not self.writable:
            return self.problem
        text = HEADER + tomli_w.dumps(prefs.to_toml())
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, text)
        except OSError as exc:
            return f"{self.path}: cannot write ({exc.strerror or exc})"
        except InputError as exc:  # a link at the path: never written through
            return exc.message
        self.prefs = prefs
        return None
