"""HPatches sequences in their native layout, and the benchmark's standard matching evaluation.

Layout (``hpatches-sequences-release``, Balntas et al. CVPR'17)::

    <root>/i_<name>/1.ppm .. 6.ppm, H_1_2 .. H_1_6     illumination changes
    <root>/v_<name>/1.ppm .. 6.ppm, H_1_2 .. H_1_6     viewpoint changes

``H_1_k`` is a 3x3 text matrix mapping a pixel (x, y, 1) of ``1.ppm`` to ``k.ppm``. Each
sequence gives five pairs (1, k). Folders not starting with ``i_`` / ``v_`` are ignored; a
sequence folder lacking an image or an H file, or an H file that is not nine finite numbers,
is one :class:`InputError` line (a benchmark with silently missing pairs would not compare
with published numbers). The eight high-resolution sequences that D2-Net / LoFTR / glue-
factory leave out (:data:`HIGH_RES_SEQUENCES`) are excluded by default (108 sequences remain).

The evaluation (:func:`hpatches_utility`, reached through
:func:`~vispriv.plugins.descriptor_release.matching.evaluate_utility` when the test images are
:class:`HPatchesImages`) follows the standard protocol with the scenario's matcher:

* image 1 is the query (protected by the defense), image k the raw reference; matches are
  :func:`~vispriv.plugins.descriptor_release.matching._match_rows` (mutual NN + ratio test, or
  vocabulary matching) of ``MatchingConfig``;
* **MMA** (D2-Net, Dusmanu et al. CVPR'19): per pair the fraction of matches whose query
  keypoint, mapped by the ground-truth ``H_1_k``, lands within t px of its reference
  keypoint, for t in ``mma_thresholds`` (1..10 px), averaged over pairs (a pair without a
  match counts 0);
* **homography accuracy** (SuperPoint, DeTone et al. CVPRW'18): kornia RANSAC on the
  matches; a pair is correct at e px when the four corners of image 1 mapped by the
  estimated and the true homography are on average within e px, e in ``corner_thresholds``
  (1, 3, 5 px); no estimate counts as wrong;
* every number also per split: ``hpatches_i_*`` (illumination) and ``hpatches_v_*`` (viewpoint).

All distances are in pixels of the ORIGINAL images: with ``max_side`` the images are resized
(aspect kept) before SIFT and keypoints are mapped back with the pixel-centre convention
``x0 = (x + 0.5) / s - 0.5``, so thresholds mean what the benchmark's do at any ``max_side``.
``SiftConfig.image_size`` does not apply to this evaluation (``max_side`` does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from vispriv.harness import Cache, CellContext, Dataset, FolderPath, Images, PluginConfig, Scene
from vispriv.harness.data.bundled import square_resize
from vispriv.harness.data.image_folder import list_images, load_image_splits, split_files
from vispriv.harness.errors import ConfigError, InputError
from vispriv.plugins.descriptor_release.datasets import SCENARIO
from vispriv.plugins.descriptor_release.frames import read_at_most
from vispriv.plugins.descriptor_release.matching import (
    DistanceFn,
    MatchingConfig,
    ProtectFn,
    _match_rows,
    apply_homography,
    corner_error,
    ransac,
)
from vispriv.plugins.descriptor_release.payloads import DescriptorPublic
from vispriv.plugins.descriptor_release.sift import SiftConfig, extract_features
from vispriv.plugins.descriptor_release.splits import load_split

#: Images per sequence; pairs are (1, k) for k = 2..6.
SEQUENCE_LENGTH = 6
#: High-resolution sequences left out by D2-Net, LoFTR and glue-factory (108 remain).
HIGH_RES_SEQUENCES = (
    "i_contruction", "i_crownnight", "i_dc", "i_pencils", "i_whitebuilding", "v_artisans", "v_astronautis", "v_talent",
)
KINDS = {"i": "illumination", "v": "viewpoint"}


@dataclass(frozen=True)
class Sequence:
    """One sequence folder: its name and the five ground-truth homographies H_1_2..H_1_6, (5, 3, 3)."""

    name: str
    folder: Path
    homographies: np.ndarray

    @property
    def kind(self) -> str:
        """``i`` (illumination) or ``v`` (viewpoint), from the folder prefix."""
        return self.name[0]

    def image_path(self, k: int) -> Path:
        return self.folder / f"{k}.ppm"


def read_homography(path: Path) -> np.ndarray:
    """A 3x3 homography from an HPatches text file (whitespace-separated numbers, row-major)."""
    try:
        values = np.array(path.read_text().split(), dtype=np.float64)
    except ValueError:
        raise InputError(f"{path}: expected a 3x3 homography of 9 numbers; found text that is not a number") from None
    if values.size != 9:
        raise InputError(f"{path}: expected a 3x3 homography of 9 finite numbers; found {values.size} values")
    h = values.reshape(3, 3)
    bad = np.argwhere(~np.isfinite(h))
    if len(bad):
        r, c = (int(i) + 1 for i in bad[0])
        raise InputError(
            f"{path}: {path.name} has a non-finite value ({h[r - 1, c - 1]}) at row {r} col {c}"
            f"{f' (and {len(bad) - 1} more)' if len(bad) > 1 else ''}; a homography needs 9 finite numbers"
        )
    if abs(np.linalg.det(h)) < 1e-12:
        raise InputError(f"{path}: the homography is singular (determinant 0)")
    return h


def read_sequences(root: str | Path, exclude: tuple[str, ...] = HIGH_RES_SEQUENCES, names: list[str] | None = None) -> list[Sequence]:
    """The ``i_*`` / ``v_*`` sequences under ``root`` (sorted), their layout checked and H files read."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise ConfigError(f"hpatches root {str(root)!r} does not exist; expected hpatches-sequences-release/ with i_*/ and v_*/ folders")
    folders = sorted(p for p in root.iterdir() if p.is_dir() and p.name[:2] in ("i_", "v_") and p.name not in exclude)
    if names is not None:
        unknown = sorted(set(names) - {p.name for p in folders})
        if unknown:
            raise ConfigError(f"hpatches sequences {unknown} are not in {str(root)!r} (or are excluded)")
        folders = [p for p in folders if p.name in names]
    if not folders:
        raise InputError(f"no i_*/v_* sequence folder in {str(root)!r}; expected the hpatches-sequences-release layout")
    out = []
    for folder in folders:
        needed = [f"{k}.ppm" for k in range(1, SEQUENCE_LENGTH + 1)] + [f"H_1_{k}" for k in range(2, SEQUENCE_LENGTH + 1)]
        missing = [f for f in needed if not (folder / f).is_file()]
        if missing:
            raise InputError(
                f"hpatches sequence {folder.name!r} lacks {', '.join(missing)}; each sequence needs 1.ppm..6.ppm and H_1_2..H_1_6"
            )
        homs = np.stack([read_homography(folder / f"H_1_{k}") for k in range(2, SEQUENCE_LENGTH + 1)])
        out.append(Sequence(folder.name, folder, homs))
    return out


def read_frame(path: Path, max_side: int | None) -> tuple[np.ndarray, tuple[float, float], tuple[int, int]]:
    """An image at most ``max_side`` px on its longer side: (image, scale (sx, sy), original (H, W))."""
    image, _, (h0, w0) = read_at_most(path, max_side, "hpatches image")
    h, w = image.shape[:2]
    return image, (w / w0, h / h0), (h0, w0)


def to_original(keypoints: np.ndarray, scale: tuple[float, float]) -> np.ndarray:
    """Keypoints (x, y) of a resized frame in pixels of the original image (pixel-centre convention)."""
    s = np.asarray(scale, np.float64)
    return (np.asarray(keypoints, np.float64).reshape(-1, 2) + 0.5) / s - 0.5


@dataclass
class HPatchesImages(Images):
    """The query images (``1.ppm`` of each sequence, square-resized) plus what the evaluation needs.

    ``images`` / ``ids`` are the private test images that the defense releases features of
    and the attacks try to reconstruct; ``sequences`` carry the folders and ground-truth
    homographies the utility evaluation reads the full pairs from (nothing secret: the
    benchmark is public).
    """

    sequences: list[Sequence] = field(default_factory=list)
    max_side: int | None = None
    mma_thresholds: tuple[int, ...] = tuple(range(1, 11))
    corner_thresholds: tuple[float, ...] = (1.0, 3.0, 5.0)

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.sequences) != len(self.images):
            raise InputError(f"HPatchesImages: {len(self.images)} images but {len(self.sequences)} sequences")


def _features(image: np.ndarray, image_id: str, sift_cfg: SiftConfig, cache: Cache | None) -> Any:
    return extract_features(Images(image[None], [image_id]), sift_cfg, cache)


def hpatches_utility(
    pairs: HPatchesImages,
    sift_cfg: SiftConfig,
    protect: ProtectFn,
    cfg: MatchingConfig,
    seed: int,
    distance: DistanceFn,
    protect_reference: bool = False,
    cache: Cache | None = None,
) -> dict[str, float]:
    """MMA and homography accuracy over every (1, k) pair of the sequences (module docstring).

    Returns ``hpatches_mma_{t}px``, ``hpatches_homography_acc_{e}px``, their ``hpatches_i_*`` /
    ``hpatches_v_*`` splits, ``hpatches_homography_acc`` at ``cfg.corner_threshold`` (the
    headline number, as ``warp_homography_acc`` is for the synthetic warps of other
    datasets) and ``hpatches_n_matches``.
    """
    frame_cfg = sift_cfg.model_copy(update={"image_size": None})
    kinds, mma, errors, n_matches = [], [], [], []
    for seq in pairs.sequences:
        img1, scale1, (h1, w1) = read_frame(seq.image_path(1), pairs.max_side)
        q_raw = _features(img1, f"{seq.name}/1", frame_cfg, cache)
        query = protect(q_raw)
        q_kp = to_original(q_raw.keypoints, scale1)
        for k in range(2, SEQUENCE_LENGTH + 1):
            img_k, scale_k, _ = read_frame(seq.image_path(k), pairs.max_side)
            r_raw = _features(img_k, f"{seq.name}/{k}", frame_cfg, cache)
            ref = protect(r_raw) if protect_reference else r_raw
            matches = _match_rows(query, np.arange(q_raw.n_keypoints), ref, np.arange(r_raw.n_keypoints), distance, cfg)
            truth = seq.homographies[k - 2]
            src, dst = q_kp[matches[:, 0]], to_original(r_raw.keypoints[matches[:, 1]], scale_k)
            err = np.linalg.norm(apply_homography(truth, src) - dst, axis=1) if len(matches) else np.zeros(0)
            mma.append([float(np.mean(err <= t)) if len(err) else 0.0 for t in pairs.mma_thresholds])
            est, _ = ransac(src, dst, "homography", cfg.ransac_threshold, cfg.ransac_max_iter, seed + len(errors))
            errors.append(corner_error(est, truth, h1, w1) if est is not None else np.inf)
            n_matches.append(len(matches))
            kinds.append(seq.kind)
    return summarise(np.array(kinds), np.array(mma), np.array(errors), np.array(n_matches), pairs, cfg.corner_threshold)


def summarise(
    kinds: np.ndarray, mma: np.ndarray, errors: np.ndarray, n_matches: np.ndarray, pairs: HPatchesImages, corner_threshold: float
) -> dict[str, float]:
    """Per-pair results -> overall and per-split means (pairs weigh equally)."""
    out: dict[str, float] = {}
    for prefix, mask in (("hpatches", np.ones(len(kinds), bool)), ("hpatches_i", kinds == "i"), ("hpatches_v", kinds == "v")):
        if not mask.any():
            continue
        for j, t in enumerate(pairs.mma_thresholds):
            out[f"{prefix}_mma_{t}px"] = float(np.mean(mma[mask, j]))
        for e in pairs.corner_thresholds:
            out[f"{prefix}_homography_acc_{e:g}px"] = float(np.mean(errors[mask] <= e))
    out["hpatches_homography_acc"] = float(np.mean(errors <= corner_threshold))
    out["hpatches_n_matches"] = float(np.mean(n_matches))
    return out


class HPatches(Dataset):
    """HPatches sequences: image 1 of each is a private test image; utility on the real (1, k) pairs.

    The public side (the defender's lifting images and the attacker's public images) is the
    bundled fixed split (:mod:`~vispriv.plugins.descriptor_release.splits`) or, with
    ``public_root``, a folder of other photos (e.g. Places365 or MegaDepth, LDP-Feat (ICCV 2023)
    section 6.1) split in two halves by a hash of each path.
    """

    class Config(PluginConfig):
        root: FolderPath = Field("", description="hpatches-sequences-release/ (i_*/ and v_*/ sequence folders); required")
        size: int = Field(128, ge=32, le=1024, description="side of the square private images the attacks see")
        max_side: int | None = Field(
            None, ge=32, description="evaluate matching on images resized to this longer side; None = full resolution"
        )
        sequences: list[str] | None = Field(None, description="only these sequence folders (default: all)")
        exclude: tuple[str, ...] = Field(HIGH_RES_SEQUENCES, description="sequence folders left out (D2-Net's 8)")
        limit: int | None = Field(None, ge=1, description="the first N sequences (sorted by name)")
        mma_thresholds: tuple[int, ...] = tuple(range(1, 11))
        corner_thresholds: tuple[float, ...] = (1.0, 3.0, 5.0)
        public_root: FolderPath | None = Field(None, description="folder of public photos; None = the bundled splits")
        sift: SiftConfig = SiftConfig()

    name = "hpatches"
    version = "1.0"
    scenario = SCENARIO
    produces = (Images,)

    def load(self, ctx: CellContext) -> Scene:
        cfg = self.config
        require_root(self.name, cfg.root, "hpatches-sequences-release/")
        seqs = read_sequences(cfg.root, cfg.exclude, cfg.sequences)[: cfg.limit]
        first = [square_resize(read_frame(s.image_path(1), None)[0], cfg.size) for s in seqs]
        private = HPatchesImages(
            np.stack(first), [s.name for s in seqs], seqs, cfg.max_side, cfg.mma_thresholds, cfg.corner_thresholds
        )
        if cfg.public_root is None:
            lifting, public = load_split("lifting", cfg.size), load_split("public", cfg.size)
        else:
            lifting, public = public_halves(cfg.public_root, cfg.size)
        return Scene(private=private, public=DescriptorPublic(lifting, public, cfg.sift))


def require_root(plugin: str, root: str, what: str) -> None:
    """A dataset whose ``root`` is required (its default is empty so that the config has defaults)."""
    if not root:
        raise ConfigError(f"dataset {plugin} needs root: the path of {what}")


def public_halves(root: str | Path, size: int) -> tuple[Images, Images]:
    """A folder of photos split into the lifting and public halves by a hash of each path."""
    root = Path(root).expanduser()
    halves = split_files(list_images(root), root, test_fraction=0.0)
    if not halves["lifting"] or not halves["public"]:
        raise InputError(f"public_root {str(root)!r} needs at least 2 JPEG/PNG photos to fill the lifting and public halves")
    loaded = load_image_splits(root, size, {"lifting": halves["lifting"], "public": halves["public"]})
    return loaded["lifting"], loaded["public"]
