"""Configuration shared by every plugin of the descriptor-release scenario.

:class:`SiftConfig` lives here (re-exported by :mod:`.sift`) so that the scene's public
knowledge (:class:`~vispriv.plugins.descriptor_release.payloads.DescriptorPublic`) can carry the one
extraction setting that the defense and the attackers' databases must share.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from vispriv.harness import PluginConfig

#: Smallest image side SIFT is run on; smaller images are rejected with an InputError.
MIN_IMAGE_SIDE = 32


class SiftConfig(PluginConfig):
    """Settings of SIFT extraction; the same instance must feed the defense and the attackers' databases."""

    image_size: int | None = Field(None, ge=MIN_IMAGE_SIDE, le=4096)
    max_keypoints: int = Field(512, ge=1, le=20000)
    response_threshold: float = Field(0.0, ge=0.0)
    detector: Literal["dog", "dense"] = "dog"
    descriptor_backend: Literal["pyramid", "patch"] = "pyramid"
    upright: bool = False
    quantize: bool = True
    dense_step: int = Field(8, ge=2)
    dense_scale: float = Field(8.0, gt=0.0)
    precision: Literal["float32", "float64"] = Field(
        "float32",
        description="floating point of the scale space and descriptors; float64 gives the same keypoints and "
        "descriptors on every CPU (float32 kernels differ by instruction set), ~20% slower",
    )


def scene_sift(own: SiftConfig | None, public: object) -> SiftConfig:
    """The SIFT setting a plugin uses: its own when given, else the scene's (``public.sift``), else the defaults.

    One rule for the defenses and every attacker, so that a dictionary or database built from
    the same public knowledge is the same on both sides.
    """
    return own or getattr(public, "sift", None) or SiftConfig()
