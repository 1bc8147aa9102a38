"""Checks of the folders the CLI writes (report, store, cache, scaffold), made before anything is written.

Nothing here creates a file or folder: a command whose output folder is unusable stops
with one line before it has opened the store, loaded a plugin or left anything behind.
"""

from __future__ import annotations

import os
from pathlib import Path

from vispriv.harness.errors import VisprivError


def existing_ancestor(path: Path) -> Path:
    """``path`` itself if it exists, else its nearest existing parent (a file, where one is in the way)."""
    probe = path
    while not os.path.lexists(probe) and probe != probe.parent:
        probe = probe.parent
    return probe


def folder_problem(folder: str | os.PathLike[str]) -> str | None:
    """Why ``folder`` cannot be created or written (it may exist already), or ``None`` when it can."""
    path = Path(folder).expanduser().absolute()
    probe = existing_ancestor(path)
    if not probe.is_dir():
        return f"{probe} is {'a file' if probe.exists() else 'a broken link'}, not a folder"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"folder {probe} is not writable"
    return None


def check_folder(folder: str | os.PathLike[str], what: str, hint: str,
                 error: type[VisprivError] = VisprivError) -> None:
    """Raise one-line ``error`` ("WHAT FOLDER cannot be written: why; HINT") unless ``folder`` can be written."""
    problem = folder_problem(folder)
    if problem is not None:
        raise error(f"{what} {Path(folder).expanduser().absolute()} cannot be written: {problem}; {hint}")
