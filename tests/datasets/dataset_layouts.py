"""Tiny fixtures written in the native layouts of the papers' datasets (nothing is downloaded).

Every image is a real photo from scikit-image, cropped small so that SIFT and training stay fast.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from vispriv.plugins.descriptor_release.matching import random_homography, warp_image

PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "immunohistochemistry", "camera")


def photo(name: str, height: int, width: int, top: int = 40, left: int = 40) -> np.ndarray:
    """A crop of a scikit-image photo as float RGB in [0, 1]."""
    import skimage.data

    img = np.asarray(getattr(skimage.data, name)(), dtype=np.float32) / 255.0
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=2)
    return img[top : top + height, left : left + width, :3]


def save(image: np.ndarray, path: Path, **kwargs) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.clip(np.round(image * 255), 0, 255).astype(np.uint8)).save(path, **kwargs)
    return path


def write_hpatches(root: Path, height: int = 160, width: int = 200, seed: int = 0) -> Path:
    """``i_astronaut`` (brightness changes, H = identity) and ``v_coffee`` (random warps, true H_1_k)."""
    rng = np.random.default_rng(seed)
    for name, kind in (("astronaut", "i"), ("coffee", "v")):
        folder = root / f"{kind}_{name}"
        base = photo(name, height, width)
        save(base, folder / "1.ppm")
        for k in range(2, 7):
            if kind == "i":
                h = np.eye(3)
                image = np.clip(base * (0.6 + 0.15 * k), 0, 1)
            else:
                h = random_homography(rng, height, width, 0.08)
                image = warp_image(base, h)
            save(image, folder / f"{k}.ppm")
            np.savetxt(folder / f"H_1_{k}", h)
    return root


def exif_with_gps(lat: float, lon: float, when: str | None) -> Image.Exif:
    """EXIF with a GPS IFD (degrees, minutes, seconds as rationals) and DateTimeOriginal."""
    from PIL.ExifTags import IFD

    exif = Image.Exif()
    gps = {
        1: "N" if lat >= 0 else "S",
        2: _dms(abs(lat)),
        3: "E" if lon >= 0 else "W",
        4: _dms(abs(lon)),
    }
    exif.get_ifd(IFD.GPSInfo).update(gps)
    if when is not None:
        exif.get_ifd(IFD.Exif)[36867] = when  # DateTimeOriginal
    return exif


def _dms(value: float) -> tuple[float, float, float]:
    d = int(value)
    m = int((value - d) * 60)
    s = round((value - d - m / 60) * 3600, 4)
    return (float(d), float(m), s)


#: Four places far apart; each is photographed in its own scikit-image photo (so features carry the place).
PLACES = ((48.85, 2.35), (-33.87, 151.21), (40.71, -74.01), (-22.91, -43.17))


def write_geotagged_photos(root: Path, per_place: int = 16, side: int = 40, seed: int = 0) -> Path:
    """``<root>/<owner>/<n>.jpg`` with EXIF GPS near one of :data:`PLACES` and a capture time.

    Owner ``u<p>`` shoots place p over two days (two capture-time sessions), so albums are
    ``u<p>#0`` and ``u<p>#1``. Also ``nogps/plain.jpg`` (no GPS IFD) and ``u0/corrupt.jpg`` (not a JPEG).
    """
    rng = np.random.default_rng(seed)
    for p, (lat, lon) in enumerate(PLACES):
        base = photo(PHOTOS[p], 200, 200)
        for i in range(per_place):
            top, left = rng.integers(0, 200 - side, size=2)
            image = base[top : top + side, left : left + side]
            day = 1 + (i >= per_place // 2) * 2
            when = f"2024:05:0{day} {10 + i % 8:02d}:00:00"
            exif = exif_with_gps(lat + rng.normal(0, 0.01), lon + rng.normal(0, 0.01), when)
            save(image, root / f"u{p}" / f"{i:03d}.jpg", exif=exif, quality=90)
    save(photo("camera", side, side), root / "nogps" / "plain.jpg")
    (root / "u0" / "corrupt.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    return root


def lfw_faces() -> np.ndarray:
    """scikit-image's bundled LFW faces (100 grey 25x25 faces in [0, 1])."""
    import skimage.data

    return np.asarray(skimage.data.lfw_subset()[:100], np.float32)


def write_lfw(root: Path, people: int = 4, per_person: int = 4) -> Path:
    """``<root>/<Person_Name>/<Person_Name>_0001.jpg`` (50x50 grey faces), plus the awkward cases:
    ``Empty_Person/`` (no file), ``Lone_Person/`` (one photo) and ``Person_0/Person_0_0099.jpg`` (corrupt)."""
    faces = lfw_faces()
    for p in range(people):
        name = f"Person_{p}"
        for i in range(per_person):
            face = np.kron(faces[p * per_person + i], np.ones((2, 2), np.float32))
            save(np.repeat(face[..., None], 3, axis=2), root / name / f"{name}_{i + 1:04d}.jpg")
    (root / "Empty_Person").mkdir(parents=True)
    save(np.repeat(faces[99][..., None], 3, axis=2), root / "Lone_Person" / "Lone_Person_0001.jpg")
    (root / "Person_0" / "Person_0_0099.jpg").write_bytes(b"\xff\xd8 truncated")
    return root


def write_celeba(root: Path, people: int = 3, per_person: int = 4) -> Path:
    """``<root>/img_align_celeba/000001.jpg`` + ``identity_CelebA.txt``; ``000999.jpg`` has no identity line."""
    faces = lfw_faces()
    lines = []
    for n in range(people * per_person):
        save(np.repeat(faces[n][..., None], 3, axis=2), root / "img_align_celeba" / f"{n + 1:06d}.jpg")
        lines.append(f"{n + 1:06d}.jpg {100 + n % people}")
    save(np.repeat(faces[50][..., None], 3, axis=2), root / "img_align_celeba" / "000999.jpg")
    (root / "identity_CelebA.txt").write_text("\n".join(lines) + "\n")
    return root


def write_scene_tree(root: Path, scenes: int = 10, per_scene: int = 2, side: int = 48) -> Path:
    """MegaDepth-style ``<root>/<scene>/dense0/imgs/<n>.jpg`` (crops of scikit-image photos)."""
    for s in range(scenes):
        base = photo(PHOTOS[s % len(PHOTOS)], 200, 200)
        for i in range(per_scene):
            save(base[10 * i : 10 * i + side, 7 * s : 7 * s + side], root / f"{s:04d}" / "dense0" / "imgs" / f"{i}.jpg")
    return root


def write_caltech101(root: Path, classes: int = 3, per_class: int = 4, side: int = 40, clutter: str = "BACKGROUND_Google") -> Path:
    """``<root>/<category>/image_0001.jpg`` as ``101_ObjectCategories/`` ships it, with its
    ``BACKGROUND_Google/`` folder (clutter photos, not an object class; Caltech-256: ``257.clutter``)."""
    names = [*["accordion", "airplanes", "anchor", "ant", "barrel"][:classes], clutter]
    for c, name in enumerate(names):
        base = photo(PHOTOS[c % len(PHOTOS)], 200, 200)
        for i in range(per_class):
            save(base[12 * i : 12 * i + side, 9 * i : 9 * i + side], root / name / f"image_{i + 1:04d}.jpg")
    return root
