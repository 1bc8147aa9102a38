"""Attack ``as-released``: the adversary takes a released image at face value."""

from __future__ import annotations

from vispriv.harness import Attack, AttackResult, CellContext, Images, Payload
from vispriv.harness.artifacts import save_image_grid


class AsReleased(Attack):
    """Estimates each private image by the released one (the floor every attack must beat)."""

    name = "as-released"
    version = "1.0"
    scenario = "image-release"
    consumes = (Images,)
    produces = (Images,)

    def attack(self, release: Images, public: Payload | None, ctx: CellContext) -> AttackResult:
        estimate = Images(release.images.copy(), ids=list(release.ids))
        if ctx.artifact_dir is not None:
            save_image_grid(ctx.artifact("release.png"), [release.images], ["release"], release.ids)
        return AttackResult(estimate={"images": estimate})
