"""Gradient pruning's scope (one threshold over the update, or one per layer) and the model head's width:
the two settings that decide whether 90 % pruning stops the pruning-aware DLG on the bundled photos."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from vispriv.harness import CellContext
from vispriv.harness.errors import ConfigError, InputError
from vispriv.plugins.defenses.gradient_pruning import GradientPruning, prune_per_layer, prune_smallest
from vispriv.plugins.federated.deep.adaptive import defense_knowledge
from vispriv.plugins.federated.deep.dataset import DeepFederatedImages
from vispriv.plugins.federated.deep.inversion import InversionSettings, invert
from vispriv.plugins.federated.deep.local import LocalWork, client_update, trainable
from vispriv.plugins.federated.deep.models import build_model
from vispriv.plugins.federated.deep.payloads import flatten, unflatten
from vispriv.plugins.federated.deep.sources import load_bundled_photos


def test_per_layer_pruning_counts_each_tensor_apart_and_the_update_scope_counts_them_together():
    update = np.array([1.0, -3.0, 2.0, 0.5, -0.1, 4.0, 1.0])
    # layer: floor(0.5 * 3) = 1 of the first tensor (|1|), floor(0.5 * 4) = 2 of the second (|0.1|, |0.5|)
    assert prune_per_layer(update, 0.5, [3, 4]).tolist() == [0.0, -3.0, 2.0, 0.0, 0.0, 4.0, 1.0]
    # update: floor(3.5) = 3 over all seven: |0.1|, |0.5|, then the first of the two |1| (position 0)
    assert prune_smallest(update, 0.5).tolist() == [0.0, -3.0, 2.0, 0.0, 0.0, 4.0, 1.0]
    # where the scopes differ: the update scope takes all three from the large-valued tensor's neighbour
    skewed = np.array([10.0, 20.0, 30.0, 0.1, 0.2, 0.3, 0.4])
    assert prune_per_layer(skewed, 0.5, [3, 4]).tolist() == [0.0, 20.0, 30.0, 0.0, 0.0, 0.3, 0.4]
    assert prune_smallest(skewed, 0.5).tolist() == [10.0, 20.0, 30.0, 0.0, 0.0, 0.0, 0.4]
    with pytest.raises(ValueError, match="add up to 6 entries but the update has 7"):
        prune_per_layer(update, 0.5, [3, 3])


def _scene(**dataset):
    ctx = CellContext(seed=0, quiet=True)
    cfg = {"size": 16, "n_users": 2, "batch_size": 1, "test_images": 4, "public_images": 4, **dataset}
    return DeepFederatedImages(DeepFederatedImages.Config(**cfg)).load(ctx), ctx


@pytest.mark.parametrize("scope", ["update", "layer"])
def test_the_defense_prunes_every_sent_update_in_its_scope(scope):
    scene, ctx = _scene()
    out = GradientPruning(GradientPruning.Config(prune=0.9, scope=scope, rounds=1)).protect(scene.private, scene.public, ctx)
    sizes = [p.numel() for p in trainable(scene.public.model()).values()]
    bounds = np.cumsum([0, *sizes])
    assert out.release.protocol["prune_scope"] == scope
    for sent in out.release.updates:
        kept = [int(np.count_nonzero(sent[a:b])) for a, b in itertools.pairwise(bounds)]
        per_layer = [n - int(np.floor(round(0.9 * n, 9))) for n in sizes]
        if scope == "layer":
            assert kept == per_layer  # every tensor keeps exactly its own 10 % (no gradient entry is exactly 0)
        else:
            assert sum(kept) == sum(sizes) - int(np.floor(round(0.9 * sum(sizes), 9)))
            assert kept != per_layer


def test_the_head_width_is_the_models_and_cannot_drop_a_class():
    scene, _ = _scene(head_classes=100)
    assert scene.public.n_classes == scene.private.n_classes == 100
    assert scene.public.model()(torch.zeros(1, 3, 16, 16)).shape == (1, 100)
    assert scene.private.labels.max() < 12
    with pytest.raises(ConfigError, match=r"head_classes \(5\) is smaller than the 12 classes of the bundled-photos source"):
        _scene(head_classes=5)


def _psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    return 10 * math.log10(1 / max(1e-12, float(((a - b) ** 2).mean())))


def test_pruning_aware_dlg_inverts_a_photo_through_90_percent_of_the_update_but_not_per_layer():
    """DLG's setting (a 100-output LeNet on unnormalised pixels, a 32x32 photo, batch 1): 90 % of the update pruned by one
    threshold leaves most convolution gradients (the head's near-zero rows fill the pruned share), and
    the pruning-aware DLG inverts them; the same 90 % taken from every layer leaves it near noise."""
    photos = load_bundled_photos(32)
    x = torch.tensor(photos.images[0]).permute(2, 0, 1)[None].float()
    y = torch.tensor([int(photos.labels[0])])
    model = build_model("lenet", 100, 3, 32, seed=0, mean=[0.0] * 3, std=[1.0] * 3)
    flat = flatten(client_update(model, x, y, LocalWork()))
    sizes = [p.numel() for p in trainable(model).values()]
    got = {}
    for scope, pruned in (("update", prune_smallest(flat, 0.9)), ("layer", prune_per_layer(flat, 0.9, sizes))):
        update = unflatten(pruned, model)
        rec = invert(model, update, 1, (3, 32, 32), 100, InversionSettings("dlg", steps=40), seed=0,
                     knowledge=defense_knowledge({"prune": 0.9}, update))
        got[scope] = _psnr(rec.images, x)
    assert got["update"] > 20 and got["layer"] < 12, got


def test_normalise_none_feeds_the_pixels_as_they_are_and_public_standardises_them():
    raw, _ = _scene(normalise="none")
    assert raw.public.mean == [0.0, 0.0, 0.0] and raw.public.std == [1.0, 1.0, 1.0]
    x = torch.rand(2, 3, 16, 16)
    model = raw.public.model()
    torch.testing.assert_close(model(x), model.net(x), rtol=0, atol=0)
    standard, _ = _scene()
    public_x = torch.as_tensor(standard.public.public_images).permute(0, 3, 1, 2)
    assert standard.public.mean == pytest.approx(public_x.mean(dim=(0, 2, 3)).tolist(), abs=1e-6)
    assert standard.public.std == pytest.approx(public_x.std(dim=(0, 2, 3)).tolist(), abs=1e-6)


def test_a_folder_source_too_small_is_refused_when_it_is_read(tmp_path):
    from skimage.io import imsave

    for name in ("cat", "dog"):
        (tmp_path / name).mkdir()
        for i in range(3):
            imsave(tmp_path / name / f"{i}.png", np.full((16, 16, 3), 40 * i, np.uint8), check_contrast=False)
    config = DeepFederatedImages.Config(source="image-folder", root=str(tmp_path), size=16, n_users=2, batch_size=1,
                                        test_images=2, public_images=2)  # 6 of the folder's 6 images: fits
    assert len(DeepFederatedImages(config).load(CellContext(seed=0, quiet=True)).private.labels) == 2
    too_many = config.model_copy(update={"public_images": 3})
    with pytest.raises(InputError, match=r"the image-folder source has 6 images but the config needs 7 "
                                         r"\(2 users x 1 \+ 2 test \+ 3 public\)"):
        DeepFederatedImages(too_many).load(CellContext(seed=0, quiet=True))
