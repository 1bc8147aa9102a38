"""Yardstick attacks of the image-inversion tables: what SSIM means without information.

* ``flat-grey`` -- every image estimated by one flat grey level, the mean brightness of the
  scene's public images: a real attacker's floor (it uses nothing the release carries).
  Normalised SIFT is invariant to an affine change of brightness, so the public mean is
  all an attacker of descriptors can know about a crop's brightness.

``mean-image`` (the mean public image; :mod:`vispriv.plugins.attacks.inversion`) stands
beside it. The oracle floor (each crop at its own mean) needs the private image, which no
attack may see: it is the metric ``oracle-flat`` (:mod:`vispriv.plugins.metrics.blur_equivalent`).
"""

from __future__ import annotations

import numpy as np

from vispriv.harness import Attack, AttackResult, CellContext, Images, Payload
from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release.datasets import SCENARIO, scene_public
from vispriv.plugins.descriptor_release.payloads import LdpFeatures, LiftedFeatures, RawFeatures


def public_mean_brightness(public: object) -> float:
    """Mean grey level in [0, 1] of the scene's public images (``DescriptorPublic.public``)."""
    images = scene_public(public).public.images
    if images.size == 0:
        raise InputError("flat-grey needs at least one public image; the scene's public set is empty")
    return float(images.mean())


class FlatGrey(Attack):
    """Every image estimated by a flat grey at the public images' mean brightness (an attacker's floor)."""

    name = "flat-grey"
    no_leak = True
    version = "1.0"
    scenario = SCENARIO
    description = "flat image at the public images' mean brightness: the floor an attacker reaches with no information"
    consumes = (RawFeatures, LiftedFeatures, LdpFeatures)
    produces = (Images,)

    def attack(self, release: Payload, public: object, ctx: CellContext) -> AttackResult:
        if not isinstance(release, self.consumes):
            raise InputError(f"flat-grey needs keypointed features (RawFeatures, LiftedFeatures, LdpFeatures); got {type(release).__name__}")
        h, w = release.image_size
        stack = np.full((len(release.image_ids), h, w, 1), public_mean_brightness(public), np.float32)
        return AttackResult(estimate={"images": Images(stack, list(release.image_ids))})
