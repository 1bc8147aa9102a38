"""Probe: the localisation room's dictionary K, streamed code against the in-memory code before it.

Not a shipped command. Stages, each meant for its own process under ``/usr/bin/time -v``:

* ``store``: render the SIMULATED room of examples/paper/ldp_feat_table2_localisation.yaml
  (cached) and stream the SIFT of its 840 lifting photos x 4 views to the descriptor store
  (cached; ldp-feat's settings: 2,048 keypoints, float64, ``dictionary_augment: 3``, seed 0);
  prints the row count;
* ``new --k K``: ``build_dictionary`` as ldp-feat calls it (two-level), words saved to ``--out``;
* ``old --k K --old-module PATH``: the store's rows in one array (what the old SIFT stage
  handed over), that module's in-memory ``hierarchical_kmeans``; compared bit for bit with
  ``--out``.

    /usr/bin/time -v .venv/bin/python benchmarks/probes/room_dictionary.py store --cache /tmp/room-cache
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import numpy as np
import yaml

TABLE2 = Path(__file__).resolve().parents[2] / "examples/paper/ldp_feat_table2_localisation.yaml"


def lifting_and_sift(cache):  # type: ignore[no-untyped-def]
    from vispriv.harness import CellContext
    from vispriv.plugins.descriptor_release.localisation.dataset import Localisation
    from vispriv.plugins.descriptor_release.sift import SiftConfig

    config = yaml.safe_load(TABLE2.read_text())
    entry = {k: v for k, v in config["datasets"][0].items() if k != "name"}
    scene = Localisation(Localisation.Config(**entry)).load(CellContext(cache=cache, quiet=False))
    return scene.public.lifting, SiftConfig(**config["defenses"][2]["sift"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("stage", choices=["store", "new", "old"])
    p.add_argument("--cache", required=True)
    p.add_argument("--k", type=int, default=4096)
    p.add_argument("--out", default="/tmp/room_words.npy")
    p.add_argument("--old-module", default="")
    args = p.parse_args()
    from vispriv.harness import Cache
    from vispriv.plugins.descriptor_release.dictionary import build_dictionary, dictionary_descriptors

    cache = Cache(args.cache)
    lifting, sift = lifting_and_sift(cache)
    if args.stage == "store":
        with dictionary_descriptors(lifting, sift, 0, 3, cache) as store:
            print(f"{len(lifting.ids)} lifting photos x 4 views: {len(store):,} descriptors")
    elif args.stage == "new":
        words = build_dictionary(lifting, args.k, sift, 0, augment=3, cache=cache, method="hierarchical")
        np.save(args.out, words)
        print(f"new: {len(words):,} words -> {args.out}")
    else:
        spec = importlib.util.spec_from_file_location("old_dictionary", args.old_module)
        assert spec and spec.loader
        old = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = old
        spec.loader.exec_module(old)
        with dictionary_descriptors(lifting, sift, 0, 3, cache) as store:
            x = store.read(0, len(store))
        words = old.hierarchical_kmeans(x, args.k, 0)
        new = np.load(args.out)
        same = words.shape == new.shape and np.array_equal(words.view(np.uint32), new.view(np.uint32))
        print(f"old: {len(words):,} words; bit-identical to {args.out}: {same}")


if __name__ == "__main__":
    main()
