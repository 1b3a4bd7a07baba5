"""Errors that end the program with a documented exit code and a message, never a traceback."""

from __future__ import annotations


class EqTuiError(Exception):
    """Base class: carries the process exit code that cli/main.py returns."""

    exit_code = 1


class UsageError(EqTuiError):
    """Invalid manifest or command line (exit 2)."""

    exit_code = 2


class ManifestError(UsageError):
    """A manifest problem, located by file, line and key path."""

    def __init__(self, message: str, *, path: str = "", line: int | None = None,
                 key_path: str = "") -> None:
        self.message = message
        self.path = path
        self.line = line
        self.key_path = key_path
        super().__init__(self.render())

    def render(self) -> str:
        where = self.path or "manifest"
        if self.line is not None:
            where += f":{self.line}"
        if self.key_path:
            where += f": {self.key_path}"
        return f"{where}: {self.message}"


class RunDirError(EqTuiError):
    """The run directory cannot be used: locked by another engine, unreadable state (exit 3)."""

    exit_code = 3


class HostError(EqTuiError):
    """A host could not be used (exit 3 when it stops the run)."""

    exit_code = 3


class UnfitJobError(EqTuiError):
    """A job that no host of the manifest could ever run: refused before any launch (exit 3)."""

    exit_code = 3
