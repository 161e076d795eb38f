"""Errors the engine raises at its public surface, each with the CLI exit code it maps to."""

from __future__ import annotations


class CockpitError(Exception):
    """Base class: a failure the user can act on. ``fix`` says how, in words."""

    exit_code = 1

    def __init__(self, message: str, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return self.message if not self.fix else f"{self.message}\n  fix: {self.fix}"


class InputError(CockpitError):
    """Bad input (task file, flag, env var, profile): exit code 2. The message names the field."""

    exit_code = 2


class BackendUnavailable(CockpitError):
    """No usable GPU backend (no driver, no device, no CuPy): exit code 3."""

    exit_code = 3
