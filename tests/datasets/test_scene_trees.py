"""scene-trees: MegaDepth-style trees, recursive discovery, a fixed split by scene."""

from pathlib import Path

import numpy as np
import pytest
from dataset_layouts import save, write_scene_tree

from vispriv.harness import Cache, CellContext
from vispriv.harness.data.image_folder import list_images
from vispriv.plugins.descriptor_release.scene_trees import SceneTrees, split_by_scene


def _scene(image_id: str) -> str:
    return Path(image_id).parts[0]


def test_no_scene_is_in_two_splits_and_the_split_is_fixed(tmp_path):
    root = write_scene_tree(tmp_path / "MegaDepth_v1", scenes=12)
    files = list_images(root)
    assert len(files) == 24  # found recursively under <scene>/dense0/imgs/
    splits = split_by_scene(files, root, 0.3)
    scenes = {name: {p.relative_to(root).parts[0] for p in paths} for name, paths in splits.items()}
    assert all(scenes.values())
    assert not scenes["test"] & scenes["lifting"] and not scenes["test"] & scenes["public"] and not scenes["lifting"] & scenes["public"]
    # A split by file (image-folder) would separate some scene's two images; the scene split never does.
    for paths in splits.values():
        for p in paths:
            assert p.parent / ("1.jpg" if p.name == "0.jpg" else "0.jpg") in paths
    # Adding a scene never moves an existing one.
    save(np.zeros((40, 40, 3)), root / "9999" / "dense0" / "imgs" / "0.jpg")
    again = split_by_scene(list_images(root), root, 0.3)
    for name, paths in splits.items():
        assert set(paths) <= set(again[name])


def test_scene_trees_dataset_gives_scene_disjoint_private_and_public_images(tmp_path):
    root = write_scene_tree(tmp_path / "MegaDepth_v1", scenes=12)
    scene = SceneTrees(SceneTrees.Config(root=str(root), size=32, test_fraction=0.3)).load(CellContext(cache=Cache(None)))
    test = {_scene(i) for i in scene.private.ids}
    train = {_scene(i) for i in scene.public.public.ids} | {_scene(i) for i in scene.public.lifting.ids}
    assert test and train and not test & train
    assert scene.private.images.shape[1:] == (32, 32, 3)


def test_too_few_scenes_is_one_line(tmp_path):
    from vispriv.harness.errors import InputError

    root = write_scene_tree(tmp_path / "MegaDepth_v1", scenes=1)
    with pytest.raises(InputError, match=r"^image folder '.*MegaDepth_v1' has 2 images: too few to fill splits \['.*'\]$"):
        SceneTrees(SceneTrees.Config(root=str(root), size=32)).load(CellContext(cache=Cache(None)))
