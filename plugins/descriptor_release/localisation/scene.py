"""SIMULATED localisation benchmark: the ray-cast room (:mod:`.render`) written in hloc's layout.

:func:`write_scene` renders ``n_references`` reference photos and ``n_queries`` query photos of
one room and writes exactly what :mod:`.reader` reads from a real benchmark:

* ``images/db/*.png`` and ``images/query/*.png``;
* ``sparse/``: a COLMAP model of the references written by pycolmap itself (PINHOLE cameras,
  the true poses, no 3D points: the map is triangulated like Aachen's), ``.bin`` or ``.txt``;
* ``queries_with_intrinsics.txt`` (``name PINHOLE w h fx fy cx cy``);
* ``queries_gt.txt``: the true query poses in hloc's format (``name qw qx qy qz tx ty tz``);
* ``images/dictionary/*.png``: ``n_dictionary_views`` further clean views of the room, in no
  model and no query list: public photos of the place, from which the defender's dictionary K
  is built beside the references (LDP-Feat's K comes from Aachen's reference images, Table 3).

Poses: every camera stands at a uniform point of the room's interior (``margin`` metres from
the walls, between ``heights``), looks along a uniform heading with a pitch uniform in
``pitch`` degrees and a roll uniform in +-``roll`` degrees. References and queries are drawn
independently, so a query may see a part of the room no two references saw (it then fails to
localise, as a real query far from the map does).

Query nuisances (what separates a query from its map on a real benchmark: illumination,
camera response, focus, sensor noise), drawn per query: a gain uniform in ``gain``, a gamma
uniform in log-space over ``gamma``, a Gaussian blur of sigma uniform in [0, ``blur``] px and
white noise of std ``noise``. References are clean.

:func:`scene_root` caches the written folder under the harness cache (keyed by the config), so
a sweep renders the room once.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
from pydantic import Field

from vispriv.harness import Cache, PluginConfig, Progress, no_progress
from vispriv.harness.data.bundled import to_uint8
from vispriv.plugins.descriptor_release.localisation.render import look_at, make_room, render

SCENE_VERSION = "1.0"
#: Marker written last: a folder without it is an interrupted write and is rebuilt.
COMPLETE = ".complete"
#: Folder under images/ of the extra dictionary views.
DICTIONARY_DIR = "dictionary"


class RoomSceneConfig(PluginConfig):
    """The SIMULATED room, its cameras and the query nuisances (module docstring)."""

    room: tuple[float, float, float] = Field((8.0, 6.0, 3.0), description="room size (m): x, y, height")
    tile: float = Field(1.0, gt=0.0, description="side (m) of one photo tile of the wall paper")
    texels_per_metre: float = Field(100.0, gt=0.0, description="texture resolution of the walls")
    width: int = Field(320, ge=32, le=4096)
    height: int = Field(240, ge=32, le=4096)
    focal: float = Field(260.0, gt=0.0, description="focal length (px) of every camera")
    supersample: int = Field(2, ge=1, le=4, description="rays per pixel side (anti-aliasing)")
    n_references: int = Field(40, ge=2)
    n_queries: int = Field(160, ge=1)
    n_dictionary_views: int = Field(
        0, ge=0, description="extra clean views in images/dictionary/ (not in the map): more public descriptors of the place for K"
    )
    margin: float = Field(1.0, ge=0.0, description="minimum distance (m) of a camera to a wall")
    heights: tuple[float, float] = Field((1.0, 2.0), description="camera heights (m)")
    pitch: tuple[float, float] = Field((-25.0, 20.0), description="camera pitch range (deg)")
    roll: float = Field(5.0, ge=0.0, description="camera roll range +- (deg)")
    gain: tuple[float, float] = Field((0.3, 1.2), description="query brightness gain range")
    gamma: tuple[float, float] = Field((0.5, 2.0), description="query gamma range (log-uniform)")
    blur: float = Field(1.5, ge=0.0, description="largest query blur sigma (px)")
    noise: float = Field(0.03, ge=0.0, description="query white-noise std")
    model_format: str = Field("bin", pattern="^(bin|txt)$", description="COLMAP model files: bin or txt")
    seed: int = Field(0, ge=0)


def random_pose(rng: np.random.Generator, cfg: RoomSceneConfig) -> tuple[np.ndarray, np.ndarray]:
    """A camera pose (R, t) drawn as the module docstring says."""
    lo = np.array([cfg.margin, cfg.margin, cfg.heights[0]])
    hi = np.array([cfg.room[0] - cfg.margin, cfg.room[1] - cfg.margin, cfg.heights[1]])
    centre = rng.uniform(lo, hi)
    yaw = rng.uniform(0, 2 * np.pi)
    pitch = np.deg2rad(rng.uniform(*cfg.pitch))
    forward = np.array([np.cos(pitch) * np.cos(yaw), np.cos(pitch) * np.sin(yaw), np.sin(pitch)])
    rot, _ = look_at(centre, forward)
    roll = np.deg2rad(rng.uniform(-cfg.roll, cfg.roll))
    c, s = np.cos(roll), np.sin(roll)
    rot = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]) @ rot
    return rot, -rot @ centre


def nuisance(image: np.ndarray, rng: np.random.Generator, cfg: RoomSceneConfig) -> np.ndarray:
    """The query photo: gain, gamma, blur and noise (module docstring)."""
    from skimage.filters import gaussian

    out = image * rng.uniform(*cfg.gain)
    out = np.clip(out, 0.0, 1.0) ** np.exp(rng.uniform(np.log(cfg.gamma[0]), np.log(cfg.gamma[1])))
    sigma = rng.uniform(0.0, cfg.blur)
    if sigma > 0:
        out = gaussian(out, sigma=sigma, channel_axis=-1, preserve_range=True)
    out = out + cfg.noise * rng.standard_normal(out.shape)
    return np.clip(out, 0.0, 1.0).astype(np.float32)


def _save_png(path: Path, image: np.ndarray) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(to_uint8(image)).save(path)


def write_model(folder: Path, names: list[str], poses: list[tuple[np.ndarray, np.ndarray]], camera: tuple, fmt: str) -> None:
    """A COLMAP model of posed images (one shared camera, no 3D points) written by pycolmap."""
    import pycolmap

    model, width, height, params = camera
    rec = pycolmap.Reconstruction()
    cam = pycolmap.Camera(model=model, width=width, height=height, params=list(params), camera_id=1)
    rec.add_camera_with_trivial_rig(cam)
    for image_id, (name, (rot, trans)) in enumerate(zip(names, poses), start=1):
        image = pycolmap.Image(name=name, camera_id=1, image_id=image_id)
        pose = pycolmap.Rigid3d(pycolmap.Rotation3d(rot), np.asarray(trans, np.float64))
        rec.add_image_with_trivial_frame(image, pose)
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "txt":
        rec.write_text(str(folder))
    else:
        rec.write_binary(str(folder))


def quaternion(rot: np.ndarray) -> np.ndarray:
    """(w, x, y, z) of a rotation matrix, w >= 0 (pycolmap's Rotation3d)."""
    import pycolmap

    xyzw = np.asarray(pycolmap.Rotation3d(np.asarray(rot, np.float64)).quat)
    wxyz = np.array([xyzw[3], xyzw[0], xyzw[1], xyzw[2]])
    return wxyz if wxyz[0] >= 0 else -wxyz


def write_scene(root: Path, cfg: RoomSceneConfig, progress: Progress = no_progress) -> Path:
    """Render the room and write the benchmark layout under ``root`` (module docstring); returns ``root``."""
    room = make_room(cfg.room, cfg.tile, cfg.texels_per_metre, cfg.seed)
    camera = ("PINHOLE", cfg.width, cfg.height, (cfg.focal, cfg.focal, cfg.width / 2, cfg.height / 2))
    rng_ref = np.random.default_rng([cfg.seed, 1])
    rng_query = np.random.default_rng([cfg.seed, 2])
    ref_names, ref_poses = [], []
    for i in progress(range(cfg.n_references), desc="render references", total=cfg.n_references):
        rot, trans = random_pose(rng_ref, cfg)
        name = f"db/ref_{i:04d}.png"
        _save_png(root / "images" / name, render(room, rot, trans, cfg.width, cfg.height, cfg.focal, cfg.supersample))
        ref_names.append(name)
        ref_poses.append((rot, trans))
    write_model(root / "sparse", ref_names, ref_poses, camera, cfg.model_format)
    intrinsics, truth = [], []
    for i in progress(range(cfg.n_queries), desc="render queries", total=cfg.n_queries):
        rot, trans = random_pose(rng_query, cfg)
        name = f"query/q_{i:04d}.png"
        photo = nuisance(render(room, rot, trans, cfg.width, cfg.height, cfg.focal, cfg.supersample), rng_query, cfg)
        _save_png(root / "images" / name, photo)
        intrinsics.append(f"{name} PINHOLE {cfg.width} {cfg.height} " + " ".join(f"{p:.6f}" for p in camera[3]))
        q = quaternion(rot)
        truth.append(f"{name} " + " ".join(f"{v:.9f}" for v in (*q, *trans)))
    rng_dict = np.random.default_rng([cfg.seed, 3])
    for i in progress(range(cfg.n_dictionary_views), desc="render dictionary views", total=cfg.n_dictionary_views):
        rot, trans = random_pose(rng_dict, cfg)
        _save_png(root / "images" / DICTIONARY_DIR / f"view_{i:04d}.png", render(room, rot, trans, cfg.width, cfg.height, cfg.focal, cfg.supersample))
    (root / "queries_with_intrinsics.txt").write_text("\n".join(intrinsics) + "\n")
    (root / "queries_gt.txt").write_text("# SIMULATED room: true cam_from_world of each query (hloc format)\n" + "\n".join(truth) + "\n")
    return root


def scene_root(cfg: RoomSceneConfig, cache: Cache, progress: Progress = no_progress) -> Path:
    """The written scene's folder: in the cache (rendered once per config) or, without a cache, a temp folder."""
    if not cache.enabled:
        return write_scene(Path(tempfile.mkdtemp(prefix="vispriv-room-")), cfg, progress)
    final = cache.path("localisation-scene", cache.key("localisation-scene", SCENE_VERSION, cfg), "")
    if (final / COMPLETE).is_file():
        return final
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-room-", dir=final.parent))
    try:
        write_scene(tmp, cfg, progress)
        (tmp / COMPLETE).write_text("SIMULATED room written by vispriv\n")
        if final.exists():
            shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final
