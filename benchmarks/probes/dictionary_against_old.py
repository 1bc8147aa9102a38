"""Does the streaming dictionary code reproduce the code before it on a localisation run's own data?

Two checks on the cache of a ``vispriv matrix`` run of the localisation tables (the store of
the dictionary views' SIFT and a cached dictionary K):

* k-means: the code before streaming (``--old-module``, e.g. ``git show
  c51d78c:plugins/descriptor_release/dictionary.py``) runs its in-memory
  ``hierarchical_kmeans`` on every row of the store; printed: whether its words equal the
  cached K to the bit (the streaming code's words, ``--words``);
* SIFT: the first ``--views`` dictionary photos of the rendered room, with their augmented
  views, described in one batch (the old path: ``augment_images`` + ``extract_features``)
  and streamed one view at a time (``dictionary_descriptors``); printed: whether the rows are equal.

Memory: the old k-means holds about 5 copies of the store's rows (~11 GiB for the room's 4.5M).

    .venv/bin/python benchmarks/probes/dictionary_against_old.py --cache CACHE \\
        --store CACHE/dictionary-sift/<key>.f32 --words CACHE/dictionary/<key>.npz --k 4096 \\
        --old-module /tmp/old_dictionary.py
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from dictionary_memory import load_module

from vispriv.harness import Images
from vispriv.harness.cache import Cache
from vispriv.plugins.descriptor_release.dictionary import dictionary_descriptors
from vispriv.plugins.descriptor_release.localisation.map import load_photo
from vispriv.plugins.descriptor_release.payloads import DESCRIPTOR_DIM
from vispriv.plugins.descriptor_release.sift import SiftConfig, extract_features


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", required=True, help="the run's --cache-dir")
    parser.add_argument("--store", required=True, help="the views' SIFT store (dictionary-sift/*.f32)")
    parser.add_argument("--words", required=True, help="the cached dictionary to compare (dictionary/*.npz)")
    parser.add_argument("--k", type=int, required=True, help="its number of words")
    parser.add_argument("--seed", type=int, default=0, help="its dictionary_seed")
    parser.add_argument("--niter", type=int, default=20)
    parser.add_argument("--augment", type=int, default=3, help="its dictionary_augment")
    parser.add_argument("--views", type=int, default=6, help="dictionary photos of the SIFT check")
    parser.add_argument("--old-module", required=True)
    args = parser.parse_args()
    old = load_module(args.old_module)

    photos = sorted(next((Path(args.cache) / "localisation-scene").iterdir()).glob("images/dictionary/*.png"))[: args.views]
    images = Images(np.stack([load_photo(p, None)[0] for p in photos]), [p.name for p in photos])
    sift = SiftConfig(max_keypoints=2048, precision="float64")
    batch = np.ascontiguousarray(extract_features(old.augment_images(images, args.augment, args.seed), sift).descriptors,
                                 dtype=np.float32)
    with dictionary_descriptors(images, sift, args.seed, args.augment, Cache(None)) as store:
        streamed = store.read(0, len(store))
    print(f"SIFT of {len(photos)} photos x {args.augment + 1} views: {len(batch)} rows batched, {len(streamed)} streamed; "
          f"equal: {batch.shape == streamed.shape and np.array_equal(batch, streamed)}", flush=True)

    rows = np.fromfile(args.store, dtype=np.float32).reshape(-1, DESCRIPTOR_DIM)
    with np.load(args.words) as cached:
        words = cached["centroids"]
    start = time.perf_counter()
    again = old.hierarchical_kmeans(rows, args.k, args.seed, niter=args.niter)
    print(f"k-means of the code before on the store's {len(rows):,} rows, {args.k} words ({time.perf_counter() - start:.0f} s): "
          f"equal to the cached words: {again.shape == words.shape and np.array_equal(again, words)}")


if __name__ == "__main__":
    main()
