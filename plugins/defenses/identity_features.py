"""``none`` of the descriptor-release scenario: the raw SIFT features are the release."""

from __future__ import annotations

from typing import Annotated

from vispriv.harness import CellContext, Defense, Images, PluginConfig, Protected, UtilityOnly
from vispriv.plugins.descriptor_release.datasets import SCENARIO, scene_public
from vispriv.plugins.descriptor_release.matching import MatchingConfig, evaluate_utility, utility_directions
from vispriv.plugins.descriptor_release.payloads import RawFeatures
from vispriv.plugins.descriptor_release.sift import extract_features


class RawFeaturesRelease(Defense):
    """No defense: keypoints and plain L2 SIFT descriptors are sent as they are (Table 1's "Raw")."""

    class Config(PluginConfig):
        utility: Annotated[bool, UtilityOnly] = True
        matching: Annotated[MatchingConfig, UtilityOnly] = MatchingConfig()

    name = "none"
    version = "1.0"
    scenario = SCENARIO
    headline = ("warp_homography_acc", "hpatches_homography_acc")
    consumes = (Images,)
    produces = (RawFeatures,)

    def protect(self, private: Images, public: object, ctx: CellContext) -> Protected:
        pub = scene_public(public)
        raw = extract_features(private, pub.sift, ctx.cache)
        utility: dict[str, float] = {}
        if self.config.utility:
            utility = evaluate_utility(
                private, pub.sift, lambda r: r, self.config.matching, ctx.child_seed("utility"), cache=ctx.cache, progress=ctx.progress
            )
        return Protected(
            release=raw,
            truth={"descriptors": raw, "images": private},
            utility=utility,
            utility_directions=utility_directions(utility),
        )
