"""Image classification sources and the user split of section 3.2 (DPHE (ICCV 2017)).

Sources (all real images, nothing downloaded):

* ``digits`` -- scikit-learn's bundled 8x8 handwritten digits (10 classes), grey
  levels 0..16 scaled to [0, 1];
* ``lfw-faces`` -- scikit-image's bundled ``lfw_subset``: 100 faces and 100 non-faces
  (25x25), a binary task;
* ``image-folder`` -- one sub-folder per class of the user's own images, read grey and
  resized to ``size`` x ``size`` (e.g. Caltech-101's ``101_ObjectCategories/``; its
  ``BACKGROUND_Google`` folder is not a class and is left out by default).

Features are the pixels (so a leaked feature vector *is* an image), optionally
standardised per dimension with the mean and standard deviation of the public
initialisation set (section 3.2 standardises features "to have zero-mean and
unit-variance for each dimension"). The inverse, ``x * std + mean``, is public.

Split (section 3.2): a class-stratified test split; of the rest, ``init_fraction`` goes
to the initialisation set (public, used by the aggregator for w̄_0) and the remainder is
split into N disjoint user sets of (almost) equal size. Each stratified take gives a class
at least one sample and never its last one, so every class keeps a training sample: a class
of two images has one in test and one in training (none in the initialisation set); a class
of one image is in training only (warned). ``split="by-class"`` instead
deals whole classes round-robin to users (a skewed, non-IID split: the case of
appendix A.2.2 where one user's data is all of one class).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vispriv.harness.data.image_folder import unreadable_reason
from vispriv.harness.errors import InputError
from vispriv.plugins.federated.payloads import FederatedData, FederatedPublic

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp"}


#: Values of ``LabelledImages.roles``: a fixed split a dataset ships (CelebA's list_eval_partition.txt).
TRAIN, INIT, TEST = 0, 1, 2


@dataclass
class LabelledImages:
    """Grey images in [0, 1] (N, H, W) with integer labels (N,) or 0/1 attributes (N, L), and their names.

    ``roles`` (optional, (N,) of TRAIN / INIT / TEST) is a split the data ship with; when set
    it replaces the random test / init split of :func:`split_users`.
    """

    images: np.ndarray
    labels: np.ndarray
    class_names: list[str]
    roles: np.ndarray | None = None


def load_digits_source() -> LabelledImages:
    """scikit-learn's bundled digits: 1797 images 8x8, 10 classes."""
    from sklearn.datasets import load_digits

    d = load_digits()
    return LabelledImages(d.images / 16.0, d.target.astype(np.int64), [str(c) for c in range(10)])


def load_lfw_source() -> LabelledImages:
    """scikit-image's bundled LFW subset: the first 100 are faces, the last 100 are not."""
    from skimage import data

    imgs = data.lfw_subset().astype(np.float64)
    labels = np.r_[np.ones(100, np.int64), np.zeros(100, np.int64)]
    return LabelledImages(imgs, labels, ["non-face", "face"])


#: Class folders that are not object classes: Caltech-101's ``BACKGROUND_Google`` (clutter
#: photos Google returned for "things") and Caltech-256's ``257.clutter``. The protocols DPHE's
#: Table 1 follows (He et al. 2014; Zeiler & Fergus 2014) use the 101 and 256 object
#: categories without them.
NOT_CLASSES = ("BACKGROUND_Google", "257.clutter")


def read_class_folders(
    root: str | Path, read: Callable[[Path], np.ndarray], what: str, exclude: tuple[str, ...] = NOT_CLASSES
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Images, labels and class names of a folder with one sub-folder per class.

    Class folders are the sub-folders of ``root`` in sorted order (labels 0, 1, ...) except
    those named in ``exclude`` (left out with a warning naming those found). ``read`` turns a
    file with an image suffix into its (resized) array; files it cannot read are skipped with
    one warning that counts and names them with the reason. ``what`` names the source in messages.
    """
    root = Path(root).expanduser()
    if not root.is_dir():
        raise InputError(f"{what} root {str(root)!r} is not a directory; expected one sub-folder per class")
    found = sorted(p.name for p in root.iterdir() if p.is_dir())
    left_out = [name for name in found if name in exclude]
    if left_out:
        warnings.warn(f"{what} {root}: class folder(s) {', '.join(left_out)} left out (excluded)", stacklevel=3)
    classes = [name for name in found if name not in exclude]
    if len(classes) < 2:
        raise InputError(f"{what} {str(root)!r} needs at least 2 class sub-folders; found {len(classes)}")
    images, labels, bad = [], [], []
    for label, name in enumerate(classes):
        for path in sorted((root / name).iterdir()):
            if not path.is_file() or path.suffix.lower() not in IMAGE_SUFFIXES:
                continue
            if path.stat().st_size == 0:  # not handed to the decoder: skimage's leaves it open when it fails
                bad.append(f"{name}/{path.name} (empty file)")
                continue
            try:
                images.append(read(path))
            except Exception as exc:  # noqa: BLE001 -- any decoder failure means "unreadable"
                bad.append(f"{name}/{path.name} ({unreadable_reason(path, exc)})")
                continue
            labels.append(label)
    if bad:
        warnings.warn(f"skipped {len(bad)} unreadable image file(s) in {root}: {', '.join(bad)}", stacklevel=3)
    if not images:
        raise InputError(f"{what} {str(root)!r} holds no readable images with suffixes {sorted(IMAGE_SUFFIXES)}")
    return np.stack(images), np.asarray(labels, np.int64), classes


def load_image_folder(root: str | Path, size: int, exclude: tuple[str, ...] = NOT_CLASSES) -> LabelledImages:
    """One sub-folder per class; images read as grey and resized to ``size`` x ``size``.

    Sub-folders named in ``exclude`` are left out (with a warning naming those found).
    """
    from skimage.color import rgb2gray, rgba2rgb
    from skimage.io import imread
    from skimage.transform import resize

    def read(path: Path) -> np.ndarray:
        img = np.asarray(imread(path), dtype=np.float64)
        if img.ndim == 3 and img.shape[-1] == 4:
            img = rgba2rgb(img / (255.0 if img.max() > 1 else 1.0))
        if img.ndim == 3:
            img = rgb2gray(img / (255.0 if img.max() > 1 else 1.0))
        elif img.max() > 1:
            img = img / 255.0
        return resize(img, (size, size), anti_aliasing=True)

    images, labels, classes = read_class_folders(root, read, "image-folder", exclude)
    return LabelledImages(images, labels, classes)


def _stratified_take(labels: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """A mask taking ``fraction`` of every class: at least one sample, and never the last one.

    A class of n >= 2 samples gives ``min(max(1, round(fraction * n)), n - 1)``, so at least one
    sample of every class stays behind (for the next split, and in the end for training); a
    class of one sample gives none. The caps bind only on classes of a few samples.
    """
    mask = np.zeros(len(labels), bool)
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        take = min(max(1, int(round(fraction * len(idx)))), len(idx) - 1)
        mask[idx[:take]] = True
    return mask


def _random_take(n: int, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """A mask taking ``fraction`` of n samples (at least one, never all): the multi-label split."""
    mask = np.zeros(n, bool)
    if n >= 2:
        mask[rng.permutation(n)[: min(max(1, int(round(fraction * n))), n - 1)]] = True
    return mask


def _test_and_init(
    source: LabelledImages, labels: np.ndarray, test_fraction: float, init_fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Test mask, init indices and training indices: the data's own split, or section 3.2's random one."""
    if source.roles is not None:
        roles = np.asarray(source.roles)
        return roles == TEST, np.flatnonzero(roles == INIT), np.flatnonzero(roles == TRAIN)
    multilabel = labels.ndim == 2
    test = _random_take(len(labels), test_fraction, rng) if multilabel else _stratified_take(labels, test_fraction, rng)
    rest = np.flatnonzero(~test)
    take = _random_take(len(rest), init_fraction, rng) if multilabel else _stratified_take(labels[rest], init_fraction, rng)
    return test, rest[take], rest[~take]


def split_users(
    source: LabelledImages,
    n_users: int,
    rng: np.random.Generator,
    test_fraction: float = 0.25,
    init_fraction: float = 0.1,
    standardise: bool = True,
    split: str = "iid",
    max_per_user: int | None = None,
    schedule_seed: int = 0,
) -> tuple[FederatedData, FederatedPublic]:
    """Split a labelled image set into test / init / N user sets (section 3.2).

    ``schedule_seed`` fixes the users' SGD sample order for every defense run on this data.
    """
    if n_users < 1:
        raise InputError(f"n_users must be >= 1; got {n_users}")
    images = np.asarray(source.images, dtype=np.float64)
    labels = np.asarray(source.labels, dtype=np.int64)
    multilabel = labels.ndim == 2
    n_classes = int(labels.shape[1]) if multilabel else int(labels.max()) + 1
    shape = (int(images.shape[1]), int(images.shape[2]))
    flat = images.reshape(len(images), -1)

    names = list(source.class_names) + [str(c) for c in range(len(source.class_names), n_classes)]
    lone = [] if multilabel else [names[c] for c in range(n_classes) if np.count_nonzero(labels == c) == 1]
    if lone and source.roles is None:
        shown = ", ".join(lone[:5]) + (", ..." if len(lone) > 5 else "")
        warnings.warn(
            f"{len(lone)} class(es) with a single image ({shown}) are in training only, with no test image",
            stacklevel=2,
        )
    test, init, train = _test_and_init(source, labels, test_fraction, init_fraction, rng)
    if len(init) == 0 and source.roles is not None:
        raise InputError("the data's own split has no initialisation (validation) sample; w̄_0 needs at least one")
    if len(init) == 0:
        raise InputError(
            "no image is left for the initialisation set: every class has at most 2 images, one kept for test "
            "and one for training; use classes with more images (e.g. a higher min_images)"
        )
    train = rng.permutation(train)
    if split == "iid":
        user = np.arange(len(train)) % n_users
    elif split == "by-class" and not multilabel:
        user = labels[train] % n_users
    else:
        raise InputError(f"split must be 'iid' or 'by-class' (single-label data only); got {split!r}")
    if max_per_user is not None:
        keep = np.zeros(len(train), bool)
        for u in range(n_users):
            keep[np.flatnonzero(user == u)[:max_per_user]] = True
        train, user = train[keep], user[keep]
    if len(train) < n_users or np.bincount(user, minlength=n_users).min() == 0:
        raise InputError(f"{len(train)} training images cannot give each of {n_users} users at least one")

    if standardise:
        mean = flat[init].mean(axis=0)
        std = flat[init].std(axis=0)
        std = np.where(std < 1e-3, 1.0, std)
    else:
        mean, std = np.zeros(flat.shape[1]), np.ones(flat.shape[1])

    def feats(idx: np.ndarray) -> np.ndarray:
        return (flat[idx] - mean) / std

    private = FederatedData(
        features=feats(train),
        labels=labels[train],
        user_index=user,
        test_features=feats(np.flatnonzero(test)),
        test_labels=labels[test],
        pixels=images[train][..., None],
        n_users=n_users,
        n_classes=n_classes,
        image_shape=shape,
        class_names=list(source.class_names),
        schedule_seed=schedule_seed,
    )
    public = FederatedPublic(
        init_features=feats(init),
        init_labels=labels[init],
        feature_mean=mean,
        feature_std=std,
        image_shape=shape,
        n_classes=n_classes,
    )
    return private, public
