"""Direct image inversion attacks of the descriptor-release scenario (ldp-feat.md 6.1, 6.3; ref [30]).

Each attack trains (once; the checkpoint is cached by content) a sparse-feature U-Net on
features of the public images (``DescriptorPublic.public``) made the way the matching
defense makes them, then reconstructs every released image:

* ``invert-raw`` -- raw SIFT descriptors at their keypoints (Table 1's "Raw" upper bound).
  Its input type, :class:`RawFeatures`, is also what the descriptor-recovery attacks
  (``database``, ``clustering``, ``nearest``) estimate, so ``chain: [database, invert-raw]``
  is the paper's two-stage attack; the network trained on raw public SIFT is shared by
  every chain (section 6.1: one pre-trained network).
* ``dia`` -- the direct inversion attack of [11]: offset and basis of each lifted subspace
  in the channels ((m + 1) * 128), trained on public descriptors lifted like the defense.
* ``invert-ldp`` -- section 6.3: the m released LDP-Feat candidates stacked (m * 128
  channels), trained on public descriptors privatised with the same mechanism.
* ``mean-image`` -- the floor: every image estimated by the mean public image.

Estimates are grey by default (SIFT carries no colour); the image metrics compare grey
estimates with RGB truth in grey.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field
from skimage.transform import resize

from harness import Attack, AttackResult, CellContext, Images, Payload, PluginConfig
from harness.artifacts import save_image_grid
from harness.errors import InputError
from harness.hashing import derive_seed
from plugins.descriptor_release.inversion import InversionConfig, SparseFeatures, load_checkpoint, reconstruct, train_or_load
from plugins.descriptor_release.inversion.data import variant_sets
from plugins.descriptor_release.payloads import DescriptorPublic, LdpFeatures, LiftedFeatures, RawFeatures
from plugins.descriptor_release.sift import SiftConfig, extract_features

SCENARIO = "descriptor-release"


class InversionAttackConfig(PluginConfig):
    """Training config of the network, SIFT settings of the public features, optional checkpoint."""

    sift: SiftConfig = SiftConfig()
    network: InversionConfig = InversionConfig()
    train_on: tuple[Literal["public", "lifting"], ...] = Field(
        ("public", "lifting"), min_length=1, description="public image sets the network trains on (both are public knowledge)"
    )
    checkpoint: str | None = Field(None, description="load this checkpoint instead of training")
    grid_images: int = Field(8, ge=1, description="reconstructions shown in the PNG grid")


def _public_images(public: Payload | None, name: str, sets: tuple[str, ...] = ("public",)) -> Images:
    """The named public image sets of the scene, stacked (resized to the first set's size)."""
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

    def release_features(self, release: Payload) -> SparseFeatures:
        raise NotImplementedError

    def public_features(self, variant: Images, release: Payload, public: DescriptorPublic, ctx: CellContext) -> SparseFeatures:
        raise NotImplementedError

    def training_tag(self, release: Payload) -> str:
        return self.name

    def training_sets(self, release: Payload, public: Payload | None, ctx: CellContext) -> list[tuple[Images, SparseFeatures]]:
        """(images, features) of every augmentation variant of every public image."""
        images = _sized(_public_images(public, self.name, self.config.train_on), self.config.sift)
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
        feats = self.release_features(release)
        if self.config.checkpoint:
            net, info = load_checkpoint(self.config.checkpoint), {"trained": 0.0}
        else:
            trained = train_or_load(self.training_sets(release, public, ctx), self.config.network, ctx, self.training_tag(release))
            net, info = trained.net, trained.info
        recon = reconstruct(net, feats)
        estimate = Images(recon, list(feats.image_ids))
        metrics = {k: float(v) for k, v in info.items() if isinstance(v, (int, float))}
        metrics["keypoints_per_image"] = len(feats.keypoints) / max(feats.n_images, 1)
        if ctx.artifact_dir is not None:
            n = self.config.grid_images
            occupancy = _keypoint_maps(feats)[:n]
            save_image_grid(ctx.artifact(f"{self.name}_reconstructions.png"), [occupancy, recon[:n]],
                            ["keypoints", "reconstruction"], feats.image_ids[:n])
        directions = {"train_seconds": False, "train_images_per_second": True, "trained": False}
        return AttackResult(estimate={"images": estimate}, metrics=metrics, metric_directions=directions)


def _keypoint_maps(feats: SparseFeatures) -> np.ndarray:
    h, w = feats.image_size
    out = np.zeros((feats.n_images, h, w, 1), np.float32)
    pix = feats.pixels()
    out[feats.image_index, pix[:, 0], pix[:, 1], 0] = 1.0
    return out


class InvertRaw(_Inversion):
    """U-Net inversion of raw (or recovered) SIFT descriptors at their keypoints ([30]; Table 1 "Raw")."""

    name = "invert-raw"
    version = "1.0"
    consumes = (RawFeatures,)

    def release_features(self, release: RawFeatures) -> SparseFeatures:
        return SparseFeatures(release.keypoints, release.descriptors, release.image_index, release.image_ids, release.image_size)

    def public_features(self, variant: Images, release: Payload, public: DescriptorPublic, ctx: CellContext) -> SparseFeatures:
        return self.release_features(extract_features(variant, self.config.sift, ctx.cache))


class DiaConfig(InversionAttackConfig):
    """How the attacker lifts public descriptors to train on (the defense's public protocol)."""

    mode: Literal["random", "adversarial", "hybrid", "sub-hybrid"] = "sub-hybrid"
    database_size: int = Field(1024, ge=16, description="attacker's own lifting database when the release carries none")


class Dia(_Inversion):
    """Direct inversion attack of [11]: the network reads offset + basis of each lifted subspace."""

    name = "dia"
    version = "1.0"
    consumes = (LiftedFeatures,)
    Config = DiaConfig

    def release_features(self, release: LiftedFeatures) -> SparseFeatures:
        from plugins.descriptor_release.subspace import canonical_offsets

        offsets = canonical_offsets(release.offsets, release.bases).cpu().numpy().astype(np.float32)
        channels = np.concatenate([offsets, release.bases.reshape(len(release.bases), -1)], axis=1)
        return SparseFeatures(release.keypoints, channels, release.image_index, release.image_ids, release.image_size)

    def training_tag(self, release: LiftedFeatures) -> str:
        return f"{self.name}-m{release.m}"

    def public_features(self, variant: Images, release: LiftedFeatures, public: DescriptorPublic, ctx: CellContext) -> SparseFeatures:
        from plugins.descriptor_release.dictionary import build_dictionary
        from plugins.descriptor_release.subspace import N_SUB_DATABASES, lift, n_adversarial

        cfg = self.config
        raw = extract_features(variant, cfg.sift, ctx.cache)
        database = release.database
        if database is None and n_adversarial(release.m, cfg.mode):
            database = build_dictionary(public.public, cfg.database_size, cfg.sift, ctx.child_seed("dia", "database"), cache=ctx.cache)
        rng = ctx.rng("dia", "lift", variant.ids[0] if variant.ids else "")
        sub = None
        if cfg.mode == "sub-hybrid":
            sub = rng.integers(N_SUB_DATABASES, size=len(raw.image_ids))[raw.image_index]
        lifted = lift(raw.descriptors, release.m, cfg.mode, rng, database=database, sub_database=sub)
        as_release = LiftedFeatures(raw.keypoints, raw.image_index, raw.image_ids, raw.image_size,
                                    offsets=lifted.offsets, bases=lifted.bases)
        return self.release_features(as_release)


class InvertLdpConfig(InversionAttackConfig):
    """The public LDP-Feat parameters the attacker privatises its training descriptors with."""

    epsilon: float = Field(10.0, ge=0.0)
    dictionary_size: int = Field(1024, ge=2)


class InvertLdp(_Inversion):
    """Section 6.3: the network reads the m LDP-Feat candidates of each keypoint stacked (m * 128 channels)."""

    name = "invert-ldp"
    version = "1.0"
    consumes = (LdpFeatures,)
    Config = InvertLdpConfig

    def release_features(self, release: LdpFeatures) -> SparseFeatures:
        stacked = release.candidates.reshape(len(release.candidates), -1)
        return SparseFeatures(release.keypoints, stacked, release.image_index, release.image_ids, release.image_size)

    def training_tag(self, release: LdpFeatures) -> str:
        return f"{self.name}-m{release.m}"

    def public_features(self, variant: Images, release: LdpFeatures, public: DescriptorPublic, ctx: CellContext) -> SparseFeatures:
        from plugins.defenses.ldp_feat import LdpFeat
        from plugins.descriptor_release.ldp import omega_subset

        cfg = self.config
        defense = LdpFeat(LdpFeat.Config(epsilon=cfg.epsilon, m=release.m, dictionary_size=cfg.dictionary_size,
                                         sift=cfg.sift, audit_trials=0))
        dictionary = defense.dictionary(public, ctx)
        raw = extract_features(variant, cfg.sift, ctx.cache)
        true_ids = defense.quantiser(dictionary, ctx).assign(raw.descriptors)
        rng = ctx.rng("invert-ldp", "mechanism", variant.ids[0] if variant.ids else "")
        ids, _ = omega_subset(true_ids, len(dictionary), release.m, cfg.epsilon, rng)
        as_release = LdpFeatures(raw.keypoints, raw.image_index, raw.image_ids, raw.image_size, candidates=dictionary[ids])
        return self.release_features(as_release)


class MeanImage(Attack):
    """The floor of every inversion: each image estimated by the mean (grey) public image."""

    name = "mean-image"
    version = "1.0"
    scenario = SCENARIO
    consumes = (RawFeatures, LiftedFeatures, LdpFeatures)
    produces = (Images,)

    def attack(self, release: Payload, public: Payload | None, ctx: CellContext) -> AttackResult:
        if not isinstance(release, self.consumes):
            raise InputError(f"mean-image needs keypointed features; got {type(release).__name__}")
        h, w = release.image_size
        images = _public_images(public, self.name).images.mean(axis=-1)
        mean = np.mean([resize(im, (h, w), anti_aliasing=True) for im in images], axis=0).astype(np.float32)
        stack = np.repeat(mean[None, :, :, None], len(release.image_ids), axis=0)
        return AttackResult(estimate={"images": Images(stack, list(release.image_ids))})


ATTACKS = (InvertRaw, Dia, InvertLdp, MeanImage)
