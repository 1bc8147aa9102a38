"""Dataset ``localisation``: a visual localisation benchmark (hloc layout), or the SIMULATED room.

With ``root`` set, the benchmark under it is read (:mod:`.reader`: Aachen
Day-Night, Cambridge Landmarks and the like in hloc's layout). With ``root`` empty (the
default) the SIMULATED room (:mod:`.scene`) is rendered once into the cache in
that same layout and read back through the same reader.

The scene it yields: the private images are the query photos (square-resized to ``size``: what
the descriptor-release attacks reconstruct), carried as
:class:`~.localisation.LocalisationImages` so that every descriptor defense's utility
evaluation (:func:`~.matching.evaluate_utility`) localises the queries against the map
instead of matching synthetic warps. The public side: the defender's lifting images are the
reference photos plus those under ``images/<lifting_dir>/`` (default ``images/dictionary/``
when present: the SIMULATED room's extra views) -- LDP-Feat's best dictionary K is built
from Aachen's reference images (Table 3) -- and the attacker's public images are the bundled
fixed split.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from pathlib import Path
from typing import IO

import numpy as np
from pydantic import Field

from vispriv.harness import Cache, CellContext, Dataset, FolderPath, Images, PluginConfig, Scene
from vispriv.harness.data.bundled import square_resize
from vispriv.harness.data.image_folder import list_images
from vispriv.harness.errors import InputError
from vispriv.harness.mapped import map_npy, write_npy
from vispriv.plugins.descriptor_release.datasets import SCENARIO
from vispriv.plugins.descriptor_release.localisation.map import load_photo
from vispriv.plugins.descriptor_release.localisation.reader import QUERIES_FILE, Benchmark, read_benchmark
from vispriv.plugins.descriptor_release.localisation.scene import DICTIONARY_DIR, RoomSceneConfig, scene_root
from vispriv.plugins.descriptor_release.localisation.utility import LocalisationImages, LocalisationProtocol
from vispriv.plugins.descriptor_release.payloads import DescriptorPublic
from vispriv.plugins.descriptor_release.sift import SiftConfig
from vispriv.plugins.descriptor_release.splits import load_split

#: Layout of the lifting photos' file (a cache key part).
LIFTING_VERSION = "1.0"

#: Ground-truth file looked for when ``poses_file`` is not given (hloc format).
DEFAULT_POSES_FILE = "queries_gt.txt"


class _MixedSizes(Exception):
    """The lifting photos do not share one size."""


def write_photo_stack(fh: IO[bytes], paths: list[Path], max_side: int | None, side: int) -> None:
    """The photos at ``paths`` (at most ``max_side`` px) as one float32 ``.npy`` in ``fh``, a photo at a
    time: as they are when they share one size (one decoding pass), else all square-resized to ``side``
    (the file restarted and the photos decoded again)."""

    def photos() -> Iterator[np.ndarray]:
        return (load_photo(p, max_side)[0] for p in paths)

    def same_size() -> Iterator[np.ndarray]:
        shape = None
        for photo in photos():
            shape = shape or photo.shape
            if photo.shape != shape:
                raise _MixedSizes
            yield photo

    def write(items: Iterator[np.ndarray]) -> None:
        first = next(items)
        write_npy(fh, (len(paths), *first.shape), np.float32, chain([first], items))

    try:
        write(same_size())
    except _MixedSizes:
        fh.seek(0)
        fh.truncate()
        write(square_resize(photo, side) for photo in photos())


class Localisation(Dataset):
    """Visual localisation benchmark (hloc layout) or the SIMULATED room; utility = % queries localised."""

    class Config(PluginConfig):
        root: FolderPath = Field("", description="benchmark folder: images/, sparse/, queries_with_intrinsics.txt; empty = SIMULATED room")
        queries_file: str = Field(QUERIES_FILE, description="query list with intrinsics, relative to root")
        poses_file: str | None = Field(
            None, description=f"ground-truth query poses relative to root; None = {DEFAULT_POSES_FILE} when present"
        )
        poses_format: str = Field("hloc", pattern="^(hloc|cambridge)$", description="hloc: name qw qx qy qz tx ty tz; cambridge: dataset_test.txt")
        limit_queries: int | None = Field(None, ge=1, description="only the first N queries (sorted as listed)")
        size: int = Field(128, ge=32, le=1024, description="side of the square private images the attacks see")
        lifting_dir: str | None = Field(
            None, description="folder under images/ whose photos join the references as lifting images (the source of K); "
            "None = images/dictionary/ when present"
        )
        lifting_size: int = Field(256, ge=32, le=4096, description="side of the reference photos as lifting images when sizes differ")
        scene: RoomSceneConfig = Field(RoomSceneConfig(), description="the SIMULATED room (root empty)")
        protocol: LocalisationProtocol = LocalisationProtocol()
        sift: SiftConfig = SiftConfig()

    name = "localisation"
    version = "1.0"
    scenario = SCENARIO
    produces = (Images,)
    description = (
        "visual localisation benchmark in hloc's layout (images/, sparse/ COLMAP model, queries_with_intrinsics.txt) "
        "or, without root, a SIMULATED ray-cast room; defenses' utility = % queries localised (pycolmap)"
    )

    def provenance(self) -> str:
        if self.config.root:
            return ""
        return "SIMULATED room (ray-cast bundled photos, plugins/descriptor_release/localisation/scene.py), not real photos"

    def benchmark(self, ctx: CellContext) -> Benchmark:
        """The benchmark read from ``root`` or from the rendered SIMULATED room."""
        cfg = self.config
        root = Path(cfg.root).expanduser() if cfg.root else scene_root(cfg.scene, ctx.cache, ctx.progress)
        poses = cfg.poses_file
        if poses is None and (root / DEFAULT_POSES_FILE).is_file():
            poses = DEFAULT_POSES_FILE
        bench = read_benchmark(root, cfg.queries_file, poses, cfg.poses_format)
        if cfg.limit_queries is not None:
            bench.queries = bench.queries[: cfg.limit_queries]
        return bench

    def load(self, ctx: CellContext) -> Scene:
        cfg = self.config
        bench = self.benchmark(ctx)
        private = LocalisationImages(
            np.stack([square_resize(load_photo(bench.image_path(q), None)[0], cfg.size) for q in bench.queries]),
            [q.name for q in bench.queries], benchmark=bench, protocol=cfg.protocol,
        )
        return Scene(private=private, public=DescriptorPublic(self._lifting(bench, ctx.cache), load_split("public", cfg.size),
                                                             cfg.sift))

    def _lifting(self, bench: Benchmark, cache: Cache) -> Images:
        """The reference photos (and those of the lifting folder) as they are when they share one
        size, else square-resized to ``lifting_size``: one float32 ``.npy`` file, written a photo
        at a time into the cache (a temporary file without one) and mapped read-only
        (:mod:`vispriv.harness.mapped`), so the dictionaries can release its pages while they
        cluster (the SIMULATED room's 840 photos are 0.75 GiB)."""
        paths = [bench.image_path(v) for v in bench.references]
        names = [v.name for v in bench.references]
        folder = bench.images_dir / (self.config.lifting_dir or DICTIONARY_DIR)
        if self.config.lifting_dir is not None and not folder.is_dir():
            raise InputError(f"lifting_dir {str(folder)!r} is not a folder under images/")
        if folder.is_dir():
            extra = list_images(folder)
            paths += extra
            names += [str(p.relative_to(bench.images_dir)) for p in extra]
        if not paths:
            raise InputError("the localisation benchmark has no reference photo")
        max_side, side = self.config.protocol.max_side, self.config.lifting_size
        files = [(str(p), st.st_size, st.st_mtime_ns) for p in paths for st in [p.stat()]]
        with cache.big_file("localisation-lifting", (LIFTING_VERSION, files, max_side, side), ".npy",
                            lambda fh: write_photo_stack(fh, paths, max_side, side)) as fh:
            return Images(map_npy(fh), names)
