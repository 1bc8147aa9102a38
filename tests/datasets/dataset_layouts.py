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


def _features_for(labels: np.ndarray, dim: int, rng: np.random.Generator) -> np.ndarray:
    """Features that carry the labels linearly, plus noise (what a network's outputs look like to a linear model)."""
    onehot = labels if labels.ndim == 2 else np.eye(int(labels.max()) + 1)[labels]
    return onehot @ rng.normal(size=(onehot.shape[1], dim)) + 0.5 * rng.normal(size=(len(labels), dim))


def write_feature_file(path: Path, n: int = 60, dim: int = 8, classes: int = 0, attributes: int = 0) -> Path:
    """The feature-file layout: an .npz of features (N x D), ids and labels ((N,) classes or (N, L) 0/1)."""
    rng = np.random.default_rng(3)
    labels = rng.integers(0, classes, n) if classes else (rng.random((n, attributes)) < 0.3).astype(np.int64)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, features=_features_for(labels, dim, rng).astype(np.float32),
             ids=np.array([f"img_{i:05d}.jpg" for i in range(n)]), labels=labels)
    return path


def write_celeba_layout(root: Path, n: int = 48, dim: int = 8, attributes: int = 5) -> dict[str, Path]:
    """CelebA's list_attr_celeba.txt (count, names, ``<id> +-1 ...``) and list_eval_partition.txt, and a
    feature file keyed by those image ids."""
    rng = np.random.default_rng(4)
    values = (rng.random((n, attributes)) < 0.4).astype(np.int64)
    ids = [f"{i + 1:06d}.jpg" for i in range(n)]
    root.mkdir(parents=True, exist_ok=True)
    lines = [str(n), " ".join(f"Attr_{j}" for j in range(attributes)) + " "]
    lines += [f"{i} " + " ".join(f"{2 * v - 1:2d}" for v in row) for i, row in zip(ids, values)]
    (root / "list_attr_celeba.txt").write_text("\n".join(lines) + "\n")
    parts = np.where(np.arange(n) < 0.6 * n, 0, np.where(np.arange(n) < 0.75 * n, 1, 2))
    (root / "list_eval_partition.txt").write_text("".join(f"{i} {p}\n" for i, p in zip(ids, parts)))
    np.savez(root / "celeba.npz", features=_features_for(values, dim, rng), ids=np.array(ids))
    return {"features": root / "celeba.npz", "attributes": root / "list_attr_celeba.txt",
            "partition": root / "list_eval_partition.txt"}


def write_flower_capture(folder: Path, clients: int = 2, lr: float = 0.1, seed: int = 0) -> Path:
    """A Flower capture as CaptureStrategy writes it (format version 1), without Flower: round 1 of the
    example app (examples/flower) with ``clients`` FedSGD clients of batch 1 -- each reply is the global
    LeNet after one SGD step on one bundled digit -- and the clients' true batches kept."""
    from vispriv.examples.flower.task import load_partition, make_net, train
    from vispriv.plugins.federated.flower.format import (
        CapturedRoundEntry,
        Manifest,
        Reply,
        save_truth,
        write_arrays,
    )

    net = make_net(seed)
    state = {k: v.numpy().copy() for k, v in net.state_dict().items()}
    names = list(state)
    entry = CapturedRoundEntry(1, "round-1/global.npz", write_arrays(folder / "round-1/global.npz", names,
                                                                      list(state.values())), {"lr": lr}, [])
    for client in range(clients):
        node = 1000 + client
        x, y = load_partition(client, clients, 1)
        local = make_net(seed)
        train(local, x, y, epochs=1, lr=lr, batch_size=1)
        rel = f"round-1/reply-{node}.npz"
        digest = write_arrays(folder / rel, names, [v.detach().numpy() for v in local.state_dict().values()])
        entry.replies.append(Reply(node, 1, rel, digest, {"num-examples": 1.0}))
        save_truth(folder, 1, node, x.numpy(), y.numpy())
    Manifest(protocol="plaintext", protocol_settings={}, strategy="FedAvg (written by the test fixture)",
             flwr_version="", run_config={"local-epochs": 1, "lr": lr, "batch-size": 1}, array_names=names,
             rounds={1: entry}).write(folder)
    return folder
