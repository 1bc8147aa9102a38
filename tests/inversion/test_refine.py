"""Refinement by descriptor matching (issue 12, session 7): the differentiable SIFT agrees with
the released extractor, the refinement moves an estimate towards the truth, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from skimage.filters import gaussian
from skimage.metrics import structural_similarity

from vispriv.harness.data.bundled import load_bundled
from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release.inversion.refine import RefineConfig, refine_to_descriptors, sift_at_frames
from vispriv.plugins.descriptor_release.patches import lafs_from_geometry
from vispriv.plugins.descriptor_release.sift import SiftConfig, extract_features

SIZE = 96


@pytest.fixture(scope="module")
def released():
    """Two bundled test photos at 96 px (grey) and their released SIFT."""
    images = load_bundled(("camera", "astronaut"), SIZE)
    grey = images.images.mean(axis=-1, keepdims=True).astype(np.float32)
    return grey, extract_features(images, SiftConfig())


def _lafs(feats) -> torch.Tensor:
    return torch.from_numpy(lafs_from_geometry(feats.keypoints, feats.scales, feats.orientations))


def test_differentiable_sift_agrees_with_the_released_descriptors(released):
    grey, feats = released
    assert len(feats.keypoints) >= 40
    x = torch.from_numpy(grey[..., 0])[:, None]
    d = sift_at_frames(x, _lafs(feats), torch.from_numpy(feats.image_index), 16).numpy()
    cos = (d * feats.descriptors).sum(1) / (np.linalg.norm(d, axis=1) * np.linalg.norm(feats.descriptors, axis=1))
    assert np.median(cos) >= 0.85
    # the same descriptors at frames of the *other* image's keypoints agree far less (the check can fail)
    swapped = torch.from_numpy(1 - feats.image_index)
    wrong = sift_at_frames(x, _lafs(feats), swapped, 16).numpy()
    cos_wrong = (wrong * feats.descriptors).sum(1) / (np.linalg.norm(wrong, axis=1) * np.linalg.norm(feats.descriptors, axis=1) + 1e-9)
    assert np.median(cos_wrong) < np.median(cos) - 0.2


def test_sift_at_frames_is_differentiable_in_the_image(released):
    grey, feats = released
    x = torch.from_numpy(grey[..., 0])[:, None].clone().requires_grad_(True)
    sift_at_frames(x, _lafs(feats), torch.from_numpy(feats.image_index)).sum().backward()
    assert x.grad is not None and float(x.grad.abs().sum()) > 0


def test_refinement_moves_a_blurred_estimate_towards_the_truth(released):
    grey, feats = released
    start = np.stack([gaussian(g[..., 0], 3)[..., None] for g in grey]).astype(np.float32)
    cfg = RefineConfig(steps=60)
    out, losses = refine_to_descriptors(start, feats.keypoints, feats.scales, feats.orientations,
                                        feats.descriptors, feats.image_index, cfg)
    assert losses["descriptor_loss_after"] < 0.5 * losses["descriptor_loss_before"]
    before = np.array([structural_similarity(g[..., 0], s[..., 0], data_range=1.0) for g, s in zip(grey, start)])
    after = np.array([structural_similarity(g[..., 0], o[..., 0], data_range=1.0) for g, o in zip(grey, out)])
    # measured: camera .663 -> .684, astronaut .473 -> .558
    assert np.all(after > before + 0.005) and (after - before).mean() > 0.03, (before, after)


def test_zero_steps_and_images_without_keypoints_are_left_alone(released):
    grey, feats = released
    flat = np.full((1, SIZE, SIZE, 1), 0.4, np.float32)
    images = np.concatenate([grey, flat])  # image 2 has no keypoint
    args = (feats.keypoints, feats.scales, feats.orientations, feats.descriptors, feats.image_index)
    same, losses = refine_to_descriptors(images, *args, RefineConfig(steps=0))
    assert np.array_equal(same, images) and losses == {}
    out, _ = refine_to_descriptors(images, *args, RefineConfig(steps=3))
    assert np.array_equal(out[2], images[2]) and not np.array_equal(out[0], images[0])


def test_colour_estimates_get_the_grey_change_in_every_channel(released):
    grey, feats = released
    colour = np.repeat(grey, 3, axis=-1) * np.array([1.0, 0.8, 0.6], np.float32)
    out, _ = refine_to_descriptors(colour, feats.keypoints, feats.scales, feats.orientations,
                                   feats.descriptors, feats.image_index, RefineConfig(steps=3))
    change = out - colour
    inside = (colour > 0.05) & (colour < 0.95)  # clipping aside, every channel moved alike
    assert np.allclose((change[..., 0] - change[..., 2])[inside.all(-1)], 0.0, atol=1e-5)


def test_bad_input_gets_one_clear_error(released):
    grey, feats = released
    k, d, i = feats.keypoints, feats.descriptors, feats.image_index
    with pytest.raises(InputError, match="scale and orientation"):
        refine_to_descriptors(grey, k, None, None, d, i, RefineConfig())
    with pytest.raises(InputError, match="differ in length"):
        refine_to_descriptors(grey, k, feats.scales, feats.orientations, d[:-1], i, RefineConfig())
    with pytest.raises(InputError, match="image_index outside"):
        refine_to_descriptors(grey[:1], k, feats.scales, feats.orientations, d, i, RefineConfig())
    with pytest.raises(InputError, match="128"):
        refine_to_descriptors(grey, k, feats.scales, feats.orientations, d[:, :64], i, RefineConfig())
