"""What 90 % gradient pruning leaves of each layer: the share of every parameter tensor's entries
that a user of ``examples/federated_deep_pruning.yaml`` sends, per head width and scope.

    python benchmarks/probes/pruning_layer_shares.py [--prune 0.9]    # also prints each weight tensor's size

Explains that example's table: with one threshold over the whole update, a 100-output head (most
of the entries, nearly all small) fills the pruned share, and the convolutions are sent almost
whole; with the photos' 12-class head the same 90 % removes most convolution entries too.
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np

from vispriv.harness import CellContext
from vispriv.plugins.defenses.gradient_pruning import GradientPruning
from vispriv.plugins.federated.deep.dataset import DeepFederatedImages
from vispriv.plugins.federated.deep.local import trainable


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prune", type=float, default=0.9)
    args = parser.parse_args()
    for head in (100, None):
        config = DeepFederatedImages.Config(n_users=4, batch_size=1, test_images=64, public_images=64,
                                            normalise="none", head_classes=head)
        scene = DeepFederatedImages(config).load(CellContext(seed=0, quiet=True))
        names = list(trainable(scene.public.model()))
        sizes = [p.numel() for p in trainable(scene.public.model()).values()]
        bounds = np.cumsum([0, *sizes])
        weights = ", ".join(f"{n} {k:,}" for n, k in zip(names, sizes) if n.endswith("weight"))
        print(f"head {head or scene.public.n_classes:>3} entries per weight tensor (of {sum(sizes):,} in the update): {weights}")
        for scope in ("update", "layer"):
            defense = GradientPruning(GradientPruning.Config(prune=args.prune, scope=scope, rounds=1))
            sent = defense.protect(scene.private, scene.public, CellContext(seed=0, quiet=True)).release.updates
            shares = [np.mean([np.count_nonzero(u[a:b]) / (b - a) for u in sent]) for a, b in itertools.pairwise(bounds)]
            cells = ", ".join(f"{n} {s:.2f}" for n, s in zip(names, shares) if n.endswith("weight"))
            print(f"head {head or scene.public.n_classes:>3} scope {scope:<6} sent share per weight tensor "
                  f"(mean of {len(sent)} users): {cells}")


if __name__ == "__main__":
    main()
