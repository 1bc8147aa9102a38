"""Each reader's example config runs a small matrix through the CLI on a fixture in the dataset's layout."""

import os
import subprocess
from pathlib import Path

import pytest
from cli_fork import run_vispriv
from dataset_layouts import write_geotagged_photos, write_hpatches, write_lfw, write_scene_tree

EXAMPLES = Path(__file__).parents[2] / "examples"


def _matrix(tmp_path: Path, example: str, plugins: str, *overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "VISPRIV_PLUGINS": f"metrics,{plugins}"}
    args = [a for o in overrides for a in ("--set", o)]
    return run_vispriv(["matrix", str(EXAMPLES / example), "--quiet", *args], cwd=tmp_path, env=env, timeout=600)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("example", "plugins", "write", "extra", "cells"),
    [
        ("hpatches.yaml", "descriptor-release", write_hpatches, ["defenses.1.epsilon=[8.0]", "defenses.1.dictionary_size=64", "defenses.1.audit_trials=200", "datasets.0.size=64"], 2),
        ("album_photos.yaml", "album-sharing", write_geotagged_photos,
         ["datasets.0.n_places=6", "datasets.0.collection=[R-2]", "datasets.0.n_albums=4", "defenses.1.mode=[greedy]"], 2),
        ("face_folders.yaml", "federated-learning", write_lfw, ["datasets.0.n_users=3", "datasets.0.split=[by-class]"], 2),
        ("scene_trees.yaml", "descriptor-release", write_scene_tree, ["attacks.1.network.steps=3"], 2),
    ],
)
def test_example_runs_on_a_fixture_in_the_native_layout(tmp_path, example, plugins, write, extra, cells):
    root = write(tmp_path / "data")
    run = _matrix(tmp_path, example, plugins, f"datasets.0.root={root}", *extra)
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"{cells} cells finished, 0 failed" in run.stdout, run.stdout[-2000:]
    assert (tmp_path / "mlflow.db").is_file()


def test_a_reader_without_root_is_one_line():
    """Every reader's config has defaults (the matrix labels cells by their overrides), so a missing root is caught at load."""
    from vispriv.harness import Cache, CellContext
    from vispriv.harness.errors import ConfigError
    from vispriv.plugins.album.photos import AlbumPhotos
    from vispriv.plugins.descriptor_release.hpatches import HPatches
    from vispriv.plugins.descriptor_release.scene_trees import SceneTrees
    from vispriv.plugins.federated.features.face_folders import FaceFolders

    ctx = CellContext(cache=Cache(None))
    cases = [
        (HPatches, "dataset hpatches needs root: the path of hpatches-sequences-release/"),
        (SceneTrees, "dataset scene-trees needs root: the path of a tree of scene folders (e.g. MegaDepth_v1/)"),
        (AlbumPhotos, "dataset album-photos needs root: the path of a folder of JPEGs with EXIF GPS"),
        (FaceFolders, "dataset face-folders needs root: the path of the LFW folder or the CelebA root"),
    ]
    for cls, message in cases:
        with pytest.raises(ConfigError) as err:
            cls(cls.Config()).load(ctx)
        assert str(err.value) == message
