"""Defenses x gradient-leakage end to end on a tiny digits scene (512-bit keys, 2 rounds)."""

from __future__ import annotations

import numpy as np
import pytest
from phe import paillier

from vispriv.harness import Images
from vispriv.harness.errors import ConfigError, InputError
from vispriv.plugins.attacks.average_isolation import AverageIsolation
from vispriv.plugins.attacks.gradient_leakage import GradientLeakage
from vispriv.plugins.defenses.dp_baselines import Prr10, Ra12
from vispriv.plugins.defenses.dphe import Dphe
from vispriv.plugins.defenses.fedavg_plain import PlainFedAvg
from vispriv.plugins.federated.datasets import FederatedImages
from vispriv.plugins.federated.linear import linear
from vispriv.plugins.federated.linear.grid_metric import LeakCorrelation
from vispriv.plugins.federated.payloads import EncryptedUpdates, PublishedAverage
from vispriv.plugins.federated.protocol import rounds as protocol_mod
from vispriv.plugins.metrics.classification import Accuracy
from vispriv.plugins.metrics.image_quality import SSIM, per_image_quality

EXACT = dict(rounds=3, reg=0.0, lr=0.05)


def _gradient_free(release, t, n):
    p = release.protocol
    return linear.prox_step(release.averages[t], np.zeros_like(release.averages[t]), p["lr"], 0.0, 0.0)


def test_plaintext_hinge_leak_is_exact(scene, ctx):
    protected = PlainFedAvg(PlainFedAvg.Config(**EXACT)).protect(scene.private, scene.public, ctx)
    result = GradientLeakage().attack(protected.release, scene.public, ctx)
    rows = per_image_quality(protected.truth["images"], result.estimate["images"])
    rel = protected.release
    carried = [
        not np.allclose(rel.updates[t, n], _gradient_free(rel, t, n)) for t in range(rel.n_rounds) for n in range(rel.n_users)
    ]
    assert sum(carried) >= len(carried) // 2
    ssims = np.array([r["ssim"] for r in rows])
    assert np.all(ssims[np.array(carried)] > 0.99)
    labels = Accuracy().score(protected.truth["labels"], result.estimate["labels"], ctx)["accuracy"]
    assert labels >= np.mean(carried)
    assert (ctx.artifact_dir / "accuracy_per_round.csv").exists()


def test_dphe_release_hides_updates_and_attack_gets_no_more_than_mean(scene, ctx, monkeypatch):
    made = []

    class Recording(protocol_mod.KeyGenerator):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)

    monkeypatch.setattr(protocol_mod, "KeyGenerator", Recording)
    cfg = Dphe.Config(key_bits=512, workers=1, **EXACT)
    protected = Dphe(cfg).protect(scene.private, scene.public, ctx)
    release = protected.release
    assert isinstance(release, EncryptedUpdates)
    (keygen,) = made
    secrets = [keygen._private_key.p, keygen._private_key.q]
    perms = [keygen._shared_perm, *keygen._user_perms]
    for value in vars(release).values():
        assert not isinstance(value, (paillier.PaillierPrivateKey,))
        if isinstance(value, np.ndarray) and value.ndim == 1:
            assert not any(len(value) == len(p) and np.array_equal(value, p) for p in perms)
    text = repr(vars(release))
    assert all(format(s, "x") not in text and str(s) not in text for s in secrets)
    assert protected.utility["secure_sum_max_abs_error"] < 1e-8

    # Per-user view of ciphertexts: nothing to invert -> exactly the public mean image.
    blind = GradientLeakage(GradientLeakage.Config(view="per-user")).attack(release, scene.public, ctx)
    truth = protected.truth["images"]
    mean = Images(np.repeat(scene.public.mean_image()[None], len(truth.images), 0), truth.ids)
    ssim_blind = SSIM().score(truth, blind.estimate["images"], ctx)["ssim"]
    ssim_mean = SSIM().score(truth, mean, ctx)["ssim"]
    assert ssim_blind <= ssim_mean + 1e-9
    # Published-average view (N = 3 mixture): far from the plaintext leak.
    mixed = GradientLeakage().attack(release, scene.public, ctx)
    assert SSIM().score(truth, mixed.estimate["images"], ctx)["ssim"] < 0.9


def test_dphe_refuses_two_users_unless_forced_and_insider_then_leaks(ctx, scene_factory):
    two = scene_factory(ctx, n_users=2)
    with pytest.raises(InputError, match="N >= 3"):
        Dphe(Dphe.Config(key_bits=512, workers=1, **EXACT)).protect(two.private, two.public, ctx)
    cfg = Dphe.Config(key_bits=512, workers=1, force=True, observer=0, **EXACT)
    protected = Dphe(cfg).protect(two.private, two.public, ctx)
    result = GradientLeakage().attack(protected.release, two.public, ctx)
    assert all(i.endswith("-u1") for i in result.estimate["images"].ids)  # estimates of the other user only
    rel = protected.release
    own = rel.own_updates
    other = 2 * rel.averages[1:] - own
    carried = [not np.allclose(other[t], _gradient_free(rel, t, 1)) for t in range(rel.n_rounds)]
    rows = per_image_quality(protected.truth["images"], result.estimate["images"])
    ssims = np.array([r["ssim"] for r in rows])
    assert any(carried) and np.all(ssims[np.array(carried)] > 0.99)


def test_prr10_noise_scale_and_accuracy(scene, ctx):
    protected = Prr10(Prr10.Config(key_bits=512, workers=1, local_epochs=30)).protect(scene.private, scene.public, ctx)
    n_min = min(len(scene.private.rows_of(n)) for n in range(3)) + len(scene.public.init_labels)
    assert protected.utility["laplace_scale"] == pytest.approx(2 / (n_min * 0.2 * 0.1))
    quiet = Prr10(Prr10.Config(key_bits=512, workers=1, local_epochs=30, eps=1e6)).protect(scene.private, scene.public, ctx)
    assert quiet.utility["test_accuracy"] == pytest.approx(quiet.utility["test_accuracy_noise_free"], abs=0.01)
    release = protected.release
    assert isinstance(release, PublishedAverage) and release.averages.shape[0] == 2  # w_0 and one published w_1
    # Only averages are published: the attacker inverts each as one update, the same estimate for every user
    # of the round (dphe.md A.2, "as the DPHE case"), in the order of the round's target ids.
    result = GradientLeakage().attack(release, scene.public, ctx)
    images, ids = result.estimate["images"], result.estimate["images"].ids
    assert ids == [i for t in range(release.n_rounds) for i in release.target_ids[t]]
    assert release.n_rounds == 1 and len(ids) == release.n_users == 3
    assert all(np.array_equal(images.images[0], images.images[n]) for n in range(1, 3))
    assert result.metrics["per_user_view"] == 0.0 and result.metrics["estimates"] == 3.0


def test_ra12_noise_degrades_the_leak(scene, ctx):
    cfg = dict(rounds=2, mode="sgd")
    noisy = Ra12(Ra12.Config(**cfg)).protect(scene.private, scene.public, ctx)
    clean = Ra12(Ra12.Config(eps=1e9, delta=0.5, **cfg)).protect(scene.private, scene.public, ctx)
    score = {}
    for name, p in (("noisy", noisy), ("clean", clean)):
        est = GradientLeakage().attack(p.release, scene.public, ctx).estimate["images"]
        score[name] = SSIM().score(p.truth["images"], est, ctx)["ssim"]
    assert score["clean"] > 0.9 and score["noisy"] < score["clean"] - 0.2


def test_leak_correlation_writes_grid(scene, ctx):
    truth = Images(scene.private.pixels[:4], ["a", "b", "c", "d"])
    out = LeakCorrelation().score(truth, truth, ctx)
    assert out["pixel_correlation"] == pytest.approx(1.0)
    assert (ctx.artifact_dir / "leak_true_vs_recovered.png").stat().st_size > 0
    flipped = Images(1.0 - truth.images, truth.ids)
    assert LeakCorrelation().score(truth, flipped, ctx)["pixel_correlation"] == pytest.approx(-1.0)


def test_dataset_split_is_disjoint_and_sources_load(ctx, tmp_path, scene_factory):
    scene = scene_factory(ctx, n_users=4, max_per_user=None)
    priv, pub = scene.private, scene.public
    assert len(priv.features) + len(priv.test_features) + len(pub.init_features) == 1797
    assert np.bincount(priv.user_index).min() >= 1797 * 0.6 // 4 - 4
    # the public standardisation inverts exactly back to the pixels
    np.testing.assert_allclose(pub.to_pixels(priv.features[:5]), priv.pixels[:5], atol=1e-6)
    faces = FederatedImages(FederatedImages.Config(source="lfw-faces", n_users=3)).load(ctx)
    assert faces.private.image_shape == (25, 25) and faces.private.n_classes == 2
    with pytest.raises(ConfigError, match="root"):
        FederatedImages.Config(source="image-folder")
    from skimage.io import imsave

    for cls in ("cat", "dog"):
        (tmp_path / "imgs" / cls).mkdir(parents=True)
        for i in range(6):
            imsave(tmp_path / "imgs" / cls / f"{i}.png", (np.random.default_rng(i).random((12, 12)) * 255).astype(np.uint8))
    folder = FederatedImages(FederatedImages.Config(source="image-folder", root=str(tmp_path / "imgs"), size=8, n_users=2))
    s = folder.load(ctx)
    assert s.private.image_shape == (8, 8) and s.private.class_names == ["cat", "dog"]


def test_hooks_register_every_plugin():
    from vispriv.plugins.federated import hooks

    got = []
    for hook in (hooks.vispriv_register_datasets, hooks.vispriv_register_defenses, hooks.vispriv_register_attacks, hooks.vispriv_register_metrics):
        hook(got.append)
    names = {c.name for c in got}
    assert names == {"federated-images", "federated-features", "federated-clustering", "centroid-leakage", "face-folders", "none", "dphe", "prr10", "ra12", "gradient-leakage",
                     "average-isolation", "leak-correlation", "federated-deep", "captured-update", "flower-capture", "federated-deep-imprint", "imprint", "gradient-pruning",
                     "dp-sgd", "dlg", "idlg", "inverting-gradients", "public-mean-image", "flower-app", "flower"}
    assert all(c.scenario == "federated-learning" for c in got)


def test_every_defense_trains_on_the_same_data_order_whatever_its_seed(scene, ctx):
    """Issue 14 item 4 (common random numbers): the SGD sample order follows the data, not the defense's seed."""
    cfg = dict(rounds=4, reg=0.01, mode="sgd")
    plain = PlainFedAvg(PlainFedAvg.Config(**cfg)).protect(scene.private, scene.public, ctx.with_seed(11))
    dphe = Dphe(Dphe.Config(key_bits=512, workers=1, **cfg)).protect(scene.private, scene.public, ctx.with_seed(12))
    ra12 = Ra12(Ra12.Config(**cfg)).protect(scene.private, scene.public, ctx.with_seed(13))
    for other in (dphe, ra12):
        assert other.truth["images"].ids == plain.truth["images"].ids
        np.testing.assert_array_equal(other.truth["images"].images, plain.truth["images"].images)
    # DPHE itself costs nothing: the same sums, hence the same classifier and accuracy.
    np.testing.assert_allclose(dphe.release.averages, plain.release.averages, atol=1e-8)
    assert dphe.utility["test_accuracy"] == plain.utility["test_accuracy"]


def test_average_isolation_recovers_samples_from_the_dphe_average_alone(scene, ctx):
    """Issue 14 item 5: the published averages of a DPHE run (N = 3, reg 0) expose single users' samples."""
    cfg = dict(rounds=40, reg=0.0, mode="sgd")
    # 256-bit keys (MIN_KEY_BITS) for speed: the attack reads only the averages, which do not depend on the key.
    protected = Dphe(Dphe.Config(key_bits=256, workers=1, **cfg)).protect(scene.private, scene.public, ctx)
    rel = protected.release
    averages_only = PublishedAverage(averages=rel.averages, protocol=rel.protocol, target_ids=rel.target_ids)
    result = AverageIsolation().attack(averages_only, scene.public, ctx)
    again = AverageIsolation().attack(rel, scene.public, ctx)
    np.testing.assert_array_equal(again.estimate["images"].images, result.estimate["images"].images)  # reads only the averages
    ssim = np.array([r["ssim"] for r in per_image_quality(protected.truth["images"], result.estimate["images"])])
    hit = (ssim > 0.99).reshape(cfg["rounds"], scene.private.n_users)
    claimed = round(result.metrics["isolated_rounds"] * cfg["rounds"])
    assert claimed >= 2
    assert hit.any(axis=1).sum() == claimed  # every claimed round names one user's sample exactly, no other round does
    assert hit.sum(axis=1).max() == 1
