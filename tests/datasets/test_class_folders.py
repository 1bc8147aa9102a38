"""Federated ``image-folder`` on Caltech-101's native layout: BACKGROUND_Google is not a class."""

import pytest
from dataset_layouts import write_caltech101

from vispriv.harness import Cache, CellContext
from vispriv.plugins.federated.datasets import FederatedImages


def test_caltech_background_google_is_left_out_by_default(tmp_path):
    root = write_caltech101(tmp_path / "101_ObjectCategories")
    ctx = CellContext(seed=0, cache=Cache(None), quiet=True)
    cfg = FederatedImages.Config(source="image-folder", root=str(root), size=8, n_users=2)
    with pytest.warns(UserWarning, match="class folder\\(s\\) BACKGROUND_Google left out"):
        scene = FederatedImages(cfg).load(ctx)
    assert scene.private.class_names == ["accordion", "airplanes", "anchor"] and scene.private.n_classes == 3
    # Configurable: with nothing excluded the background folder is a fourth class.
    scene = FederatedImages(cfg.model_copy(update={"exclude_classes": ()})).load(ctx)
    assert scene.private.class_names == ["BACKGROUND_Google", "accordion", "airplanes", "anchor"]


def test_caltech256_clutter_is_left_out_by_default(tmp_path):
    root = write_caltech101(tmp_path / "256_ObjectCategories", clutter="257.clutter")
    ctx = CellContext(seed=0, cache=Cache(None), quiet=True)
    cfg = FederatedImages.Config(source="image-folder", root=str(root), size=8, n_users=2)
    with pytest.warns(UserWarning, match="class folder\\(s\\) 257.clutter left out"):
        scene = FederatedImages(cfg).load(ctx)
    assert scene.private.class_names == ["accordion", "airplanes", "anchor"]
