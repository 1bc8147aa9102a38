"""Relative paths written in a config file are read from its folder; those given with ``--set`` from the shell's.

A config and its data move together (``cfg/c.yaml`` naming ``photos`` reads ``cfg/photos``
from any shell folder), while a path typed on the command line means what it means to the
shell (tests/datasets/test_paper_scale_doc.py passes ``--set datasets.0.root=...`` so). A
folder that is not there is named by its resolved absolute path. Real subprocesses.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml
from cli_fork import run_vispriv

from vispriv.harness.config import load_config, validate_config
from vispriv.harness.config_paths import resolve_config_paths
from vispriv.harness.registry import load_registry

CONFIG = {"name": "rel", "datasets": [{"name": "image-folder", "root": "photos"}],
          "defenses": [{"name": "pixelate", "block": 2}], "attacks": ["as-released"]}


def _dry_run(cwd: Path, config: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "VISPRIV_PLUGINS": "image-release,metrics"}
    return run_vispriv(["matrix", str(config), "--dry-run", *args], cwd=cwd, env=env, timeout=300)


def _config_in_a_subfolder(tmp_path: Path, root: str = "photos") -> Path:
    path = tmp_path / "cfg" / "c.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump({**CONFIG, "datasets": [{"name": "image-folder", "root": root}]}, sort_keys=False))
    return path


def test_a_path_in_the_config_file_is_read_from_its_folder(tmp_path):
    config = _config_in_a_subfolder(tmp_path)
    (tmp_path / "cfg" / "photos").mkdir()
    done = _dry_run(tmp_path, config)
    assert done.returncode == 0, done.stderr
    # Only cfg/photos exists (a root that is not there is an error): the label names it by its stem.
    assert not (tmp_path / "photos").exists()
    assert "image-folder(root=photos) | pixelate(block=2) | as-released" in done.stdout
    resolved = resolve_config_paths(load_config(config), load_registry())
    assert resolved.datasets[0]["root"] == f"{tmp_path}/cfg/photos"


def test_a_path_given_with_set_is_read_from_the_shell_folder(tmp_path):
    config = _config_in_a_subfolder(tmp_path)
    (tmp_path / "cfg" / "photos").mkdir()
    (tmp_path / "mine").mkdir()
    done = _dry_run(tmp_path, config, "--set", "datasets.0.root=mine")
    assert done.returncode == 0, done.stderr
    assert "image-folder(root=mine) | pixelate(block=2) | as-released" in done.stdout
    done = _dry_run(tmp_path, config, "--set", "datasets.0.root=photos")  # cfg/photos is not tmp_path/photos
    assert done.returncode == 2 and done.stderr.strip() == (
        f"error: dataset 'image-folder': root: folder '{tmp_path}/photos' does not exist or is not a directory "
        "(got 'photos')"), done.stderr


def test_a_missing_folder_is_named_by_its_resolved_path(tmp_path):
    config = _config_in_a_subfolder(tmp_path, root="../data/nope")
    done = _dry_run(tmp_path / "cfg", config)  # from the config's own folder: the path is kept as written
    assert done.returncode == 2 and done.stderr.strip() == (
        f"error: dataset 'image-folder': root: folder '{tmp_path}/data/nope' does not exist or is not a directory "
        "(got '../data/nope')"), done.stderr
    done = _dry_run(tmp_path, config)  # from elsewhere: resolved against the config's folder
    assert done.returncode == 2 and done.stderr.strip() == (
        f"error: dataset 'image-folder': root: folder '{tmp_path}/data/nope' does not exist or is not a directory "
        f"(got '{tmp_path}/data/nope')"), done.stderr


def test_a_config_in_the_shell_folder_keeps_its_paths_as_written(tmp_path, monkeypatch):
    """Both rules give the same file there, and the cells keep the hashes they had."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "photos").mkdir()
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    registry = load_registry()
    assert resolve_config_paths(load_config(path), registry).datasets == CONFIG["datasets"]
    assert resolve_config_paths(validate_config(dict(CONFIG)), registry).datasets == CONFIG["datasets"]
