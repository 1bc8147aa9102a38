"""scene-trees: MegaDepth-style trees, recursive discovery, a fixed split by scene."""

from pathlib import Path

import numpy as np
import pytest
from dataset_layouts import save, write_scene_tree

from vispriv.harness import Cache, CellContext
from vispriv.harness.data.image_folder import list_images
from vispriv.harness.errors import ConfigError
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


def test_too_few_scenes_names_the_scenes_found_and_what_each_split_needs(tmp_path):
    from vispriv.harness.errors import InputError

    root = write_scene_tree(tmp_path / "MegaDepth_v1", scenes=2)
    with pytest.raises(InputError) as err:
        SceneTrees(SceneTrees.Config(root=str(root), size=32)).load(CellContext(cache=Cache(None)))
    message = str(err.value)
    assert "\n" not in message and "too few scenes" in message and "too few to fill splits" not in message
    assert f"scene tree '{root}' has 2 scene(s) (0000, 0001)" in message
    assert "test / lifting / public each need at least 1 scene (3 in all)" in message
    # With the test photos given separately, root fills two splits only: the message says so.
    photos, places = tmp_path / "holiday", tmp_path / "places"
    save(np.zeros((40, 40, 3)), photos / "a.jpg")
    save(np.ones((40, 40, 3)), places / "b.jpg")
    with pytest.raises(InputError, match=r"has 2 scene\(s\) .* lifting / public each need at least 1 scene \(2 in all\); "
                       r"the split by scene gave lifting 0, public 2\. Add scenes, or give database_root"):
        SceneTrees(SceneTrees.Config(root=str(root), test_root=str(photos), size=32)).load(CellContext(cache=Cache(None)))
    # With both other roles given, root only trains the attacker: two scenes are enough.
    cfg = SceneTrees.Config(root=str(root), test_root=str(photos), database_root=str(places), size=32)
    scene = SceneTrees(cfg).load(CellContext(cache=Cache(None)))
    assert scene.private.ids == ["a.jpg"] and scene.public.lifting.ids == ["b.jpg"] and len(scene.public.public.ids) == 4


def _roles(tmp_path):
    scenes = write_scene_tree(tmp_path / "MegaDepth_v1", scenes=6)
    places = tmp_path / "places365"
    for i, category in enumerate(("abbey", "beach", "canyon")):
        save(np.full((40, 40, 3), 0.1 * i), places / category / f"{i:08d}.jpg")
    holiday = tmp_path / "holiday"
    for i in range(3):
        save(np.full((40, 40, 3), 0.5), holiday / f"{i}.jpg")
    return scenes, places, holiday


def test_the_papers_three_roles_come_from_three_roots(tmp_path):
    scenes, places, holiday = _roles(tmp_path)
    ctx = CellContext(cache=Cache(None))
    cfg = SceneTrees.Config(root=str(scenes), database_root=str(places), test_root=str(holiday), size=32)
    scene = SceneTrees(cfg).load(ctx)
    assert scene.private.ids == ["0.jpg", "1.jpg", "2.jpg"]  # test photos
    assert scene.public.lifting.ids == ["abbey/00000000.jpg", "beach/00000001.jpg", "canyon/00000002.jpg"]  # database
    assert sorted(scene.public.public.ids) == sorted(str(p.relative_to(scenes)) for p in list_images(scenes))  # all scenes
    # database_root alone: root's scenes fill test and public (no scene of root in lifting).
    scene = SceneTrees(cfg.model_copy(update={"test_root": "", "test_fraction": 0.4})).load(ctx)
    assert scene.public.lifting.ids[0] == "abbey/00000000.jpg"
    test, public = {_scene(i) for i in scene.private.ids}, {_scene(i) for i in scene.public.public.ids}
    assert test and public and not test & public and test | public == {f"{s:04d}" for s in range(6)}
    # Overlapping roots would put a test photo in the attacker's training set.
    with pytest.raises(ConfigError, match=r"test_root .* overlap"):
        SceneTrees(cfg.model_copy(update={"test_root": str(scenes / "0003")})).load(ctx)


def test_limit_samples_round_robin_across_scenes(tmp_path):
    from vispriv.plugins.descriptor_release.scene_trees import scene_balanced

    root = write_scene_tree(tmp_path / "MegaDepth_v1", scenes=12, per_scene=6, side=32)
    files = list_images(root)
    order = scene_balanced(files, root, seed=0)
    assert sorted(order) == files
    first = [_scene(str(p.relative_to(root))) for p in order[:12]]
    assert len(set(first)) == 12  # the first 12 images come from 12 different scenes
    assert scene_balanced(files, root, seed=0) == order and scene_balanced(files, root, seed=1) != order


def test_a_limited_test_split_covers_many_scenes(tmp_path):
    """limit 5 test images from a test split of several 6-image scenes: 5 scenes (or all), not the first one."""
    root = write_scene_tree(tmp_path / "MegaDepth_v1", scenes=12, per_scene=6, side=32)
    cfg = SceneTrees.Config(root=str(root), size=32, test_fraction=0.3, limit=5)
    scene = SceneTrees(cfg).load(CellContext(cache=Cache(None)))
    full = SceneTrees(cfg.model_copy(update={"limit": None})).load(CellContext(cache=Cache(None)))
    n_scenes = len({_scene(i) for i in full.private.ids})
    assert len(scene.private.ids) == 5 and n_scenes >= 2
    assert len({_scene(i) for i in scene.private.ids}) == min(5, n_scenes)
