"""What the refinement matches (issue 12, session 8): candidate sets and lifted subspaces.

The data terms are checked against brute force (numpy least squares for the point-to-subspace
distance, an explicit loop for the nearest candidate); a refinement that knows only each
descriptor's lifted subspace moves a blurred estimate towards the truth; recovered features
carry their subspaces through a chain into ``invert-raw``; bad input gets one error each.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from skimage.filters import gaussian
from skimage.metrics import structural_similarity

from vispriv.harness.data.bundled import load_bundled
from vispriv.harness.errors import ConfigError, InputError
from vispriv.plugins.attacks.inversion import Dia, InvertLdp, InvertRaw
from vispriv.plugins.descriptor_release.attack_common import recovered
from vispriv.plugins.descriptor_release.inversion.refine import RefineConfig, SiftTargets, refine_to_descriptors
from vispriv.plugins.descriptor_release.payloads import LdpFeatures, LiftedFeatures, RecoveredFeatures
from vispriv.plugins.descriptor_release.sift import SiftConfig, extract_features
from vispriv.plugins.descriptor_release.subspace import lift

SIZE = 96


@pytest.fixture(scope="module")
def released():
    """Two bundled test photos at 96 px (grey), their SIFT, and that SIFT lifted to random 2-d subspaces."""
    images = load_bundled(("camera", "astronaut"), SIZE)
    grey = images.images.mean(axis=-1, keepdims=True).astype(np.float32)
    feats = extract_features(images, SiftConfig())
    lifting = lift(feats.descriptors, 2, "random", np.random.default_rng(0))
    lifted = LiftedFeatures(**feats.keypoint_fields(), offsets=lifting.offsets, bases=lifting.bases, mode="random")
    return grey, feats, lifted


def _brute_sqdist(points: np.ndarray, offsets: np.ndarray, bases: np.ndarray) -> np.ndarray:
    """Squared distance of each point to its affine subspace by least squares on the basis."""
    out = np.empty(len(points))
    for k, (p, o, b) in enumerate(zip(points.astype(np.float64), offsets.astype(np.float64), bases.astype(np.float64))):
        coef, *_ = np.linalg.lstsq(b.T, p - o, rcond=None)
        out[k] = np.sum((p - o - b.T @ coef) ** 2)
    return out


def test_subspace_term_is_the_point_to_subspace_distance(released):
    _, feats, lifted = released
    targets = SiftTargets(offsets=lifted.offsets, bases=lifted.bases)
    rows = np.arange(len(feats.descriptors))
    at_truth = targets.data_term(torch.from_numpy(feats.descriptors), rows).numpy()
    assert at_truth.max() < 1e-4  # every true descriptor lies on its subspace
    rng = np.random.default_rng(1)
    others = feats.descriptors + rng.normal(0, 0.05, feats.descriptors.shape).astype(np.float32)
    term = targets.data_term(torch.from_numpy(others), rows).numpy()
    assert np.allclose(term, _brute_sqdist(others, lifted.offsets, lifted.bases), rtol=1e-3, atol=1e-5)
    assert term.min() > 1e-3  # and points off it are not


def test_candidate_term_is_the_nearest_candidate(released):
    _, feats, _ = released
    rng = np.random.default_rng(2)
    cands = rng.normal(0, 0.1, (len(feats.descriptors), 3, 128)).astype(np.float32)
    f = feats.descriptors
    want = np.array([min(np.sum((f[k] - c) ** 2) for c in cands[k]) for k in range(len(f))])
    got = SiftTargets(candidates=cands).data_term(torch.from_numpy(f), np.arange(len(f))).numpy()
    assert np.allclose(got, want, rtol=1e-4)
    both = SiftTargets(candidates=cands, offsets=np.zeros((len(f), 128), np.float32),
                       bases=np.eye(128, dtype=np.float32)[None, :2].repeat(len(f), 0), subspace_weight=2.0)
    extra = 2.0 * np.sum(f[:, 2:].astype(np.float64) ** 2, axis=1)  # distance to the span of e0, e1
    assert np.allclose(both.data_term(torch.from_numpy(f), np.arange(len(f))).numpy(), want + extra, rtol=1e-4)
    rows = np.arange(0, len(f), 3)  # a chunk's targets, taken once, score its rows alike
    assert np.array_equal(both.take(rows).data_term(torch.from_numpy(f[rows])).numpy(),
                          both.data_term(torch.from_numpy(f[rows]), rows).numpy())


def test_the_subspace_alone_moves_a_blurred_estimate_towards_the_truth(released):
    grey, feats, lifted = released
    start = np.stack([gaussian(g[..., 0], 3)[..., None] for g in grey]).astype(np.float32)
    targets = SiftTargets(offsets=lifted.offsets, bases=lifted.bases)
    out, losses = refine_to_descriptors(start, feats.keypoints, feats.scales, feats.orientations,
                                        targets, feats.image_index, RefineConfig(steps=60))
    assert losses["descriptor_loss_after"] < 0.5 * losses["descriptor_loss_before"]
    before = np.array([structural_similarity(g[..., 0], s[..., 0], data_range=1.0) for g, s in zip(grey, start)])
    after = np.array([structural_similarity(g[..., 0], o[..., 0], data_range=1.0) for g, o in zip(grey, out)])
    assert np.all(after > before + 0.005), (before, after)


def test_each_attack_reads_its_release_for_the_refinement(released):
    _, feats, lifted = released
    cands = np.stack([feats.descriptors, lifted.offsets], axis=1)
    rec = recovered(lifted, lifted.offsets, cands)
    assert isinstance(rec, RecoveredFeatures) and np.array_equal(rec.bases, lifted.bases)

    def targets(attack, release, **refine):
        return attack(attack.Config(refine=RefineConfig(**refine))).refine_targets(release)

    raw = targets(InvertRaw, feats)
    assert raw.offsets is None and np.array_equal(raw.candidates[:, 0], feats.descriptors)
    sub = targets(InvertRaw, rec)  # default: the subspace alone
    assert sub.candidates is None and np.array_equal(sub.offsets, lifted.offsets)
    est = targets(InvertRaw, rec, points="estimate", subspace_weight=0.5)
    assert np.array_equal(est.candidates[:, 0], lifted.offsets) and est.subspace_weight == 0.5
    assert targets(InvertRaw, rec, points="candidates").candidates.shape[1] == 2
    off = targets(InvertRaw, rec, subspace_weight=0)
    assert off.offsets is None and np.array_equal(off.candidates[:, 0], lifted.offsets)
    assert np.array_equal(targets(Dia, lifted).bases, lifted.bases)
    with pytest.raises(ConfigError, match="nothing to match"):
        targets(Dia, lifted, subspace_weight=0)
    ldp = LdpFeatures(**feats.keypoint_fields(), candidates=cands)
    assert targets(InvertLdp, ldp).candidates.shape == cands.shape


def test_bad_targets_get_one_clear_error(released):
    _, feats, lifted = released
    with pytest.raises(InputError, match="descriptors, candidates or subspaces"):
        SiftTargets()
    with pytest.raises(InputError, match="come together"):
        SiftTargets(offsets=lifted.offsets)
    with pytest.raises(InputError, match="candidate"):
        SiftTargets(candidates=np.zeros((3, 2, 64), np.float32))
    with pytest.raises(InputError, match="bases"):
        SiftTargets(offsets=lifted.offsets, bases=lifted.bases[:, 0])
    with pytest.raises(InputError, match="candidate sets but"):
        SiftTargets(candidates=feats.descriptors[:-1], offsets=lifted.offsets, bases=lifted.bases)
    with pytest.raises(InputError, match="differ in length"):
        refine_to_descriptors(np.zeros((2, SIZE, SIZE, 1), np.float32), feats.keypoints, feats.scales,
                              feats.orientations, SiftTargets(offsets=lifted.offsets[:-1], bases=lifted.bases[:-1]),
                              feats.image_index, RefineConfig())
    with pytest.raises(InputError, match="offsets"):
        RecoveredFeatures(**feats.keypoint_fields(), descriptors=feats.descriptors, offsets=lifted.offsets[:-1],
                          bases=lifted.bases)
