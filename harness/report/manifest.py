"""The report's own files: a manifest in the report folder, so a later run removes what it no longer writes.

A report's figures are named after the tables they show (``heatmap_<scenario>__<metric>.png``);
when a metric, a dataset or a label changes, the next run writes other names and the old
figures stayed beside them, unreferenced. Each run now lists the files it wrote in
:data:`MANIFEST` (paths relative to the folder) and, before listing them, removes the files the
previous manifest lists that this run did not write. Nothing else is touched: a file the
report did not write (a user's notes, a figure copied in by hand) is never in a manifest.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from vispriv.harness.writes import refused, write_text

#: The manifest's file name in the report folder.
MANIFEST = ".vispriv-report-files.json"


def previous_files(out_dir: Path) -> list[str]:
    """The paths (relative to ``out_dir``) the last report run in ``out_dir`` wrote; none without a readable manifest."""
    try:
        listed = json.loads((out_dir / MANIFEST).read_text(encoding="utf-8")).get("files", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [p for p in listed if isinstance(p, str)]


def _inside(out_dir: Path, relative: str) -> Path | None:
    """``out_dir / relative`` when it stays inside ``out_dir`` (a manifest edited by hand cannot reach out), else None."""
    root = out_dir.resolve()
    path = (root / relative).resolve()
    return path if path != root and root in path.parents else None


def replace_manifest(out_dir: Path, written: Iterable[Path]) -> list[Path]:
    """Remove the files of the previous manifest that this run did not write, then list ``written``.

    Returns the removed files. Only files inside ``out_dir`` that a manifest lists are removed.
    """
    root = out_dir.resolve()
    now = sorted({str(Path(f).resolve().relative_to(root)) for f in written if root in Path(f).resolve().parents})
    removed = []
    for relative in previous_files(out_dir):
        path = _inside(out_dir, relative)
        if path is None or relative in now or not path.is_file():
            continue
        with refused(path):
            path.unlink()
        removed.append(path)
    write_text(out_dir / MANIFEST, json.dumps({"files": now}, indent=1) + "\n")
    return removed
