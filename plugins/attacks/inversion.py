"""Direct image inversion attacks of the descriptor-release scenario (LDP-Feat (ICCV 2023) 6.1, 6.3; ref [30]).

Each attack trains (once; the checkpoint is cached by content) a sparse-feature U-Net on
features of the public images (``DescriptorPublic.public``) made the way the matching
defense makes them, then reconstructs every released image:

* ``invert-raw`` -- raw SIFT descriptors at their keypoints (Table 1's "Raw" upper bound);
  the network's estimate is then refined until its own SIFT at the released keypoint frames
  matches the released descriptors (``refine``; inversion by optimisation, see
  :mod:`vispriv.plugins.descriptor_release.inversion.refine`).
  Its input type, :class:`RawFeatures`, is also what the descriptor-recovery attacks
  (``database``, ``clustering``, ``nearest``) estimate, so ``chain: [database, invert-raw]``
  is the paper's two-stage attack; the network trained on raw public SIFT is shared by
  every chain (section 6.1: one pre-trained network).
* ``dia`` -- the direct inversion attack of [11]: offset and basis of each lifted subspace
  in the channels ((m + 1) * 128), trained on public descriptors lifted like the defense;
  refined until the image's SIFT at each keypoint lies on its released subspace.
* ``invert-ldp`` -- section 6.3: the m released LDP-Feat candidates stacked (m * 128
  channels), trained on public descriptors privatised with the same mechanism; it can be
  refined towards the nearest of each keypoint's m candidates (off by default: it did not
  pay on Table 4's crops).
* ``mean-image`` -- the floor: every image estimated by the mean public image.

The refinement is the same stage for all three (``refine``, :class:`SiftTargets`): each
attack says what its release tells about each descriptor (the descriptor itself; the lifted
subspace that holds it -- also for descriptors recovered from a lifted release, which carry
their subspaces as :class:`RecoveredFeatures`; a candidate set).

Estimates are grey by default (SIFT carries no colour); the image metrics compare grey
estimates with RGB truth in grey.

What the network trains on (the threat model): by default only the attacker's own public
images (``DescriptorPublic.public``), the set the clustering and nearest attacks draw Z
from; LDP-Feat (ICCV 2023) section 6.1 trains on MegaDepth, disjoint from the test images and from
the photos W was built from. The lifting images (``DescriptorPublic.lifting``, the
defender's photos behind W) are *not* granted by any attack's threat model -- not even the
database attack's, which holds W's centroids, not the photos -- so ``train_on: [public,
lifting]`` is an explicit opt-in for a stronger attacker. ``dia`` lifts its training
descriptors with the release's W when the release publishes it, else with a database of
its own built from the public images; ``invert-ldp`` privatises them with the public
LDP-Feat dictionary.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from vispriv.harness import Attack, AttackResult, CellContext, Images, Payload, PluginConfig
from vispriv.harness.artifacts import save_image_grid
from vispriv.harness.errors import ConfigError, InputError
from vispriv.harness.hashing import derive_seed
from vispriv.plugins.descriptor_release.config import SiftConfig, scene_sift
from vispriv.plugins.descriptor_release.inversion import InversionConfig, SparseFeatures
from vispriv.plugins.descriptor_release.inversion.config import RefineConfig
from vispriv.plugins.descriptor_release.inversion.refine import SiftTargets
from vispriv.plugins.descriptor_release.payloads import (
    DescriptorPublic,
    LdpFeatures,
    LiftedFeatures,
    RawFeatures,
    RecoveredFeatures,
)
from vispriv.plugins.descriptor_release.sift import extract_features

SCENARIO = "descriptor-release"
#: Gain on the geometry channels, so they are about as large as a unit descriptor's entries.
GEOMETRY_GAIN = 0.25


def geometry_channels(release: RawFeatures | LiftedFeatures | LdpFeatures) -> np.ndarray:
    """(K, 3) channels of each keypoint's geometry: log2(scale / 8 px), cos and sin of its
    orientation, times :data:`GEOMETRY_GAIN`. A SIFT descriptor is a histogram of gradients
    in the keypoint's rotated and scaled frame (Lowe 2004), so without this frame the network
    cannot tell which way an edge runs in the image."""
    if release.scales is None or release.orientations is None:
        raise InputError(
            "the release carries no keypoint scales/orientations; set the attack's geometry: false "
            "(or release features made by extract_features)"
        )
    theta = np.deg2rad(release.orientations)
    geo = np.stack([np.log2(release.scales / 8.0), np.cos(theta), np.sin(theta)], axis=1)
    return (GEOMETRY_GAIN * geo).astype(np.float32)


class InversionAttackConfig(PluginConfig):
    """Training config of the network, SIFT settings of the public features, optional checkpoint."""

    sift: SiftConfig | None = Field(None, description="SIFT of the public images; None = the scene's (DescriptorPublic.sift)")
    network: InversionConfig = InversionConfig()
    train_on: tuple[Literal["public", "lifting"], ...] = Field(
        ("public",),
        min_length=1,
        description="image sets the network trains on: public = the attacker's own images (every threat model); "
        "lifting = the defender's photos W was built from (granted by none of LDP-Feat's threat models: opt-in)",
    )
    geometry: bool = Field(
        True,
        description="also feed each keypoint's scale and orientation (released beside its location, as COLMAP "
        "stores them) as 3 channels: log2(scale / 8 px), cos and sin of the orientation, times GEOMETRY_GAIN",
    )
    checkpoint: str | None = Field(None, description="load this checkpoint instead of training")
    grid_images: int = Field(8, ge=1, description="reconstructions shown in the PNG grid")
    refine: RefineConfig = Field(
        RefineConfig(),
        description="refine the network's estimate until its SIFT at the released frames matches what the release "
        "says of each descriptor (inversion by optimisation, Mahendran and Vedaldi 2015); steps: 0 = the network alone",
    )


def _public_images(public: Payload | None, name: str, sets: tuple[str, ...] = ("public",)) -> Images:
    """The named public image sets of the scene, stacked (resized to the first set's size)."""
    from skimage.transform import resize
    if not isinstance(public, DescriptorPublic):
        raise InputError(f"{name} needs DescriptorPublic (public images to train on); got {type(public).__name__}")
    parts = [getattr(public, s) for s in sets]
    h, w = parts[0].images.shape[1:3]
    arrays = [p.images if p.images.shape[1:3] == (h, w) else
              np.stack([resize(im, (h, w), anti_aliasing=True) for im in p.images]).astype(np.float32) for p in parts]
    channels = max(a.shape[-1] for a in arrays)
    arrays = [np.repeat(a, channels // a.shape[-1], axis=-1) for a in arrays]
    return Images(np.concatenate(arrays), [f"{s}/{i}" for s, p in zip(sets, parts) for i in p.ids])


def _sized(images: Images, sift: SiftConfig) -> Images:
    """The images in SIFT's extraction frame (square ``sift.image_size`` when set)."""
    from skimage.transform import resize
    if sift.image_size is None:
        return images
    s = sift.image_size
    arr = np.stack([resize(im, (s, s), anti_aliasing=True) for im in images.images]).astype(np.float32)
    return Images(np.clip(arr, 0, 1), list(images.ids))


class _Inversion(Attack):
    """Shared train-or-load / reconstruct / artifacts of the inversion attacks."""

    scenario = SCENARIO
    produces = (Images,)
    Config: ClassVar[type[PluginConfig]] = InversionAttackConfig
    resources: ClassVar[dict[str, float]] = {"cpus": 2}
    config: Any

    def channels(self, release: Payload) -> np.ndarray:
        """(K, C) feature vector of every released keypoint (the attack's reading of the release)."""
        raise NotImplementedError

    def release_features(self, release: Payload) -> SparseFeatures:
        """The network's sparse input: :meth:`channels` (+ the keypoints' geometry)."""
        channels = self.channels(release)
        if self.config.geometry:
            channels = np.concatenate([channels, geometry_channels(release)], axis=1)
        return SparseFeatures(release.keypoints, channels, release.image_index, release.image_ids, release.image_size)

    def sift(self, public: Payload | None) -> SiftConfig:
        """The SIFT setting of the scene (every party's), unless the config overrides it."""
        return scene_sift(self.config.sift, public)

    def public_features(self, variant: Images, release: Payload, public: DescriptorPublic, ctx: CellContext) -> SparseFeatures:
        raise NotImplementedError

    def training_tag(self, release: Payload) -> str:
        return self.name

    def training_sets(self, release: Payload, public: Payload | None, ctx: CellContext) -> list[tuple[Images, SparseFeatures]]:
        """(images, features) of every augmentation variant of every public image."""
        from vispriv.plugins.descriptor_release.inversion.data import variant_sets

        images = _sized(_public_images(public, self.name, self.config.train_on), self.sift(public))
        cfg = self.config.network
        # Training randomness follows the config's seed, not the cell's, so cells share one network.
        train_ctx = ctx.with_seed(derive_seed(cfg.seed, self.name))
        sets = []
        for variant in variant_sets(images, cfg.scales, cfg.flip):
            sets.append((variant, self.public_features(variant, release, public, train_ctx)))
        return sets

    def attack(self, release: Payload, public: Payload | None, ctx: CellContext) -> AttackResult:
        if not isinstance(release, self.consumes):
            raise InputError(f"{self.name} needs {' or '.join(t.__name__ for t in self.consumes)}; got {type(release).__name__}")
        from vispriv.plugins.descriptor_release.inversion.train import load_checkpoint, reconstruct, train_or_load

        feats = self.release_features(release)
        if self.config.checkpoint:
            net, info = load_checkpoint(self.config.checkpoint), {"trained": 0.0}
        else:
            trained = train_or_load(self.training_sets(release, public, ctx), self.config.network, ctx, self.training_tag(release))
            net, info = trained.net, trained.info
        network_estimate = reconstruct(net, feats)
        recon, refine_metrics = self.refine(network_estimate, release, ctx)
        estimate = Images(recon, list(feats.image_ids))
        metrics = {k: float(v) for k, v in info.items() if isinstance(v, (int, float))}
        metrics["keypoints_per_image"] = len(feats.keypoints) / max(feats.n_images, 1)
        metrics.update(refine_metrics)
        if ctx.artifact_dir is not None:
            n = self.config.grid_images
            rows, labels = [_keypoint_maps(feats)[:n], recon[:n]], ["keypoints", "reconstruction"]
            if refine_metrics:
                rows, labels = [rows[0], network_estimate[:n], rows[1]], ["keypoints", "network", "reconstruction"]
            save_image_grid(ctx.artifact(f"{self.name}_reconstructions.png"), rows, labels, feats.image_ids[:n])
        directions = {"train_seconds": False, "train_images_per_second": True, "trained": False,
                      "refine_seconds": False, "refine_descriptor_loss_before": False,
                      "refine_descriptor_loss_after": False}
        return AttackResult(estimate={"images": estimate}, metrics=metrics, metric_directions=directions)

    def refine_targets(self, release: Payload) -> SiftTargets:
        """What the release says of each keypoint's descriptor, for the refinement's data term."""
        raise NotImplementedError

    def refine(self, estimate: np.ndarray, release: Payload, ctx: CellContext) -> tuple[np.ndarray, dict[str, float]]:
        """The second stage: the network's estimate refined by descriptor matching
        (:func:`~vispriv.plugins.descriptor_release.inversion.refine.refine_to_descriptors`)
        against :meth:`refine_targets`; ``refine: {steps: 0}`` returns it unchanged."""
        import time

        from vispriv.plugins.descriptor_release.inversion.refine import refine_to_descriptors

        cfg = self.config.refine
        if cfg.steps == 0:
            return estimate, {}
        start = time.perf_counter()
        refined, losses = refine_to_descriptors(
            estimate, release.keypoints, release.scales, release.orientations, self.refine_targets(release),
            release.image_index, cfg, progress=ctx.progress,
        )
        return refined, {**{f"refine_{k}": v for k, v in losses.items()}, "refine_seconds": time.perf_counter() - start}


def _keypoint_maps(feats: SparseFeatures) -> np.ndarray:
    h, w = feats.image_size
    out = np.zeros((feats.n_images, h, w, 1), np.float32)
    pix = feats.pixels()
    out[feats.image_index, pix[:, 0], pix[:, 1], 0] = 1.0
    return out


class InvertRaw(_Inversion):
    """U-Net inversion of raw (or recovered) SIFT descriptors at their keypoints ([30]; Table 1 "Raw"),
    refined by descriptor matching (:mod:`~vispriv.plugins.descriptor_release.inversion.refine`).

    Recovered descriptors (:class:`RecoveredFeatures`, from ``database`` / ``clustering`` /
    ``nearest``) carry the lifted subspaces they were recovered from, which hold the true
    descriptors: the refinement then also matches them (``refine.subspace_weight``) and reads
    the recovery as ``refine.points`` says (the estimate, the whole candidate set, or nothing).
    """

    name = "invert-raw"
    version = "1.2"
    consumes = (RawFeatures,)

    def refine_targets(self, release: RawFeatures) -> SiftTargets:
        cfg = self.config.refine
        if not isinstance(release, RecoveredFeatures):
            return SiftTargets(candidates=release.descriptors)
        points = {"estimate": release.descriptors, "none": None,
                  "candidates": release.descriptors if release.candidates is None else release.candidates}[cfg.points]
        if cfg.subspace_weight == 0:
            return SiftTargets(candidates=release.descriptors if points is None else points)
        return SiftTargets(candidates=points, offsets=release.offsets, bases=release.bases,
                           subspace_weight=cfg.subspace_weight)

    def channels(self, release: RawFeatures) -> np.ndarray:
        return release.descriptors

    def public_features(self, variant: Images, release: Payload, public: DescriptorPublic, ctx: CellContext) -> SparseFeatures:
        return self.release_features(extract_features(variant, self.sift(public), ctx.cache))


class DiaConfig(InversionAttackConfig):
    """How the attacker lifts public descriptors to train on (the defense's public protocol)."""

    mode: Literal["random", "adversarial", "hybrid", "sub-hybrid"] = "sub-hybrid"
    database_size: int = Field(1024, ge=16, description="attacker's own lifting database when the release carries none")


class Dia(_Inversion):
    """Direct inversion attack of [11]: the network reads offset + basis of each lifted subspace,
    then the estimate is refined until its SIFT lies on the subspaces (``refine.subspace_weight``)."""

    name = "dia"
    version = "1.1"
    consumes = (LiftedFeatures,)
    Config = DiaConfig

    def channels(self, release: LiftedFeatures) -> np.ndarray:
        from vispriv.plugins.descriptor_release.subspace import canonical_offsets

        offsets = canonical_offsets(release.offsets, release.bases).cpu().numpy().astype(np.float32)
        return np.concatenate([offsets, release.bases.reshape(len(release.bases), -1)], axis=1)

    def training_tag(self, release: LiftedFeatures) -> str:
        return f"{self.name}-m{release.m}"

    def refine_targets(self, release: LiftedFeatures) -> SiftTargets:
        weight = self.config.refine.subspace_weight
        if weight == 0:
            raise ConfigError("dia: refine.subspace_weight 0 leaves nothing to match; set refine: {steps: 0} for the network alone")
        return SiftTargets(offsets=release.offsets, bases=release.bases, subspace_weight=weight)

    def public_features(self, variant: Images, release: LiftedFeatures, public: DescriptorPublic, ctx: CellContext) -> SparseFeatures:
        from vispriv.plugins.descriptor_release.dictionary import build_dictionary
        from vispriv.plugins.descriptor_release.subspace import N_SUB_DATABASES, lift, n_adversarial

        cfg = self.config
        sift = self.sift(public)
        raw = extract_features(variant, sift, ctx.cache)
        database = release.database
        if database is None and n_adversarial(release.m, cfg.mode):
            database = build_dictionary(public.public, cfg.database_size, sift, ctx.child_seed("dia", "database"), cache=ctx.cache)
        rng = ctx.rng("dia", "lift", variant.ids[0] if variant.ids else "")
        sub = None
        if cfg.mode == "sub-hybrid":
            sub = rng.integers(N_SUB_DATABASES, size=len(raw.image_ids))[raw.image_index]
        lifted = lift(raw.descriptors, release.m, cfg.mode, rng, database=database, sub_database=sub)
        as_release = LiftedFeatures(**raw.keypoint_fields(), offsets=lifted.offsets, bases=lifted.bases)
        return self.release_features(as_release)


class InvertLdpConfig(InversionAttackConfig):
    """The public LDP-Feat parameters the attacker privatises its training descriptors with.

    ``defense`` holds any other field of the ``ldp-feat`` defense's config (dictionary_size,
    dictionary_seed, ...): copy the defense's, so the training features are made exactly as
    the release was. ``m`` is read from the release, and so are ``epsilon`` and
    ``dictionary_size`` when the release carries them (they are public parameters of the
    mechanism); otherwise the config's values are used.
    """

    epsilon: float = Field(10.0, ge=0.0)
    dictionary_size: int | Literal["full"] | None = Field(None, description="shortcut for defense.dictionary_size")
    defense: dict[str, Any] = Field(default_factory=dict)
    refine: RefineConfig = Field(
        RefineConfig(steps=0),
        description="refine towards the nearest of each keypoint's m candidates; off by default: on Table 4's crops it "
        "scored below the network alone at every epsilon (docs/results.md, 'Table 4 analog: inverting LDP-Feat releases (ε 10-16, m = 2, |K| = 256k)')",
    )


class InvertLdp(_Inversion):
    """Section 6.3: the network reads the m LDP-Feat candidates of each keypoint stacked (m * 128 channels);
    ``refine: {steps: 100}`` then pulls the estimate towards the nearest of each keypoint's candidates (off by default)."""

    name = "invert-ldp"
    version = "1.1"
    consumes = (LdpFeatures,)
    Config = InvertLdpConfig

    def channels(self, release: LdpFeatures) -> np.ndarray:
        return release.candidates.reshape(len(release.candidates), -1)

    def refine_targets(self, release: LdpFeatures) -> SiftTargets:
        return SiftTargets(candidates=release.candidates)

    def training_tag(self, release: LdpFeatures) -> str:
        eps = getattr(release, "epsilon", None)
        eps = self.config.epsilon if eps is None else eps
        return f"{self.name}-m{release.m}-eps{eps}"

    def public_features(self, variant: Images, release: LdpFeatures, public: DescriptorPublic, ctx: CellContext) -> SparseFeatures:
        from vispriv.plugins.defenses.ldp_feat import LdpFeat
        from vispriv.plugins.descriptor_release import ldp

        cfg = self.config
        sift = self.sift(public)
        released_eps = getattr(release, "epsilon", None)
        settings = {**cfg.defense, "epsilon": cfg.epsilon if released_eps is None else released_eps,
                    "m": release.m, "audit_trials": 0}
        size = getattr(release, "dictionary_size", None) or cfg.dictionary_size
        if size is not None:
            settings["dictionary_size"] = size
        if "sift" in LdpFeat.Config.model_fields:
            settings["sift"] = sift
        try:
            defense = LdpFeat(LdpFeat.Config(**settings))
        except ValueError as exc:
            raise ConfigError(f"invert-ldp: invalid ldp-feat settings {settings}: {exc}") from None
        raw = extract_features(variant, sift, ctx.cache)
        rng = ctx.rng("invert-ldp", "mechanism", variant.ids[0] if variant.ids else "")
        if defense.config.naive:
            codes, _ = ldp.naive_omega_subset(raw.descriptors, release.m, defense.config.epsilon, rng)
            candidates = ldp.from_uint8_domain(codes)
        else:
            dictionary = defense.dictionary(public, ctx)
            true_ids = defense.quantiser(dictionary, ctx).assign(raw.descriptors)
            ids, _ = ldp.omega_subset(true_ids, len(dictionary), release.m, defense.config.epsilon, rng)
            candidates = dictionary[ids]
        as_release = LdpFeatures(**raw.keypoint_fields(), candidates=candidates)
        return self.release_features(as_release)


class MeanImage(Attack):
    """The floor of every inversion: each image estimated by the mean (grey) public image."""

    name = "mean-image"
    no_leak = True
    version = "1.0"
    scenario = SCENARIO
    consumes = (RawFeatures, LiftedFeatures, LdpFeatures)
    produces = (Images,)

    def attack(self, release: Payload, public: Payload | None, ctx: CellContext) -> AttackResult:
        from skimage.transform import resize
        if not isinstance(release, self.consumes):
            raise InputError(f"mean-image needs keypointed features; got {type(release).__name__}")
        h, w = release.image_size
        images = _public_images(public, self.name).images.mean(axis=-1)
        mean = np.mean([resize(im, (h, w), anti_aliasing=True) for im in images], axis=0).astype(np.float32)
        stack = np.repeat(mean[None, :, :, None], len(release.image_ids), axis=0)
        return AttackResult(estimate={"images": Images(stack, list(release.image_ids))})


ATTACKS = (InvertRaw, Dia, InvertLdp, MeanImage)
