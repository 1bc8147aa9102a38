"""A SIMULATED room for the visual localisation utility: ray-cast renders of a textured box.

The room is the axis-aligned box ``[0, W] x [0, D] x [0, H]`` (metres, z up). Each of its six
faces (floor, ceiling, four walls) carries a mosaic of the bundled natural photos
(:data:`~vispriv.harness.data.bundled.BUNDLED_SOURCES`): tiles of ``tile`` metres, each a
random crop of a random photo, randomly flipped, at ``texels_per_metre``. A pinhole camera
(COLMAP's ``PINHOLE`` model, pixel centres at +0.5) is rendered by casting one ray per
sub-pixel (``supersample`` x ``supersample`` per pixel, averaged), finding the face the ray
leaves the box through, and sampling that face's texture bilinearly (scipy). Nothing is
downloaded; the same seed gives the same room and the same photos.

Camera convention (COLMAP's): ``x_cam = R x_world + t`` with the camera looking down +z,
x right, y down.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vispriv.harness.data.bundled import BUNDLED_SOURCES, to_rgb_float

#: Photos the walls are papered with (every bundled natural photo except the stereo pair).
TEXTURE_PHOTOS = tuple(name for name in BUNDLED_SOURCES if not name.startswith("motorcycle"))


@dataclass(frozen=True)
class Room:
    """The box's size (metres) and one RGB texture per face, indexed by :func:`face_index`."""

    size: tuple[float, float, float]
    textures: tuple[np.ndarray, ...]
    texels_per_metre: float


def face_index(axis: int, upper: bool) -> int:
    """Face number of the box side ``axis`` (0 = x, 1 = y, 2 = z) at its lower or upper bound."""
    return 2 * axis + int(upper)


def _face_extent(size: tuple[float, float, float], axis: int) -> tuple[float, float]:
    """The (u, v) extent in metres of a face orthogonal to ``axis`` (u, v = the other two axes in order)."""
    u, v = [a for a in range(3) if a != axis]
    return size[u], size[v]


def _mosaic(extent: tuple[float, float], tile: float, texels: float, photos: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """A (rows, cols, 3) texture of ``extent`` metres made of random photo crops, one per tile."""
    from skimage.transform import resize

    cols, rows = (max(1, int(round(e * texels))) for e in extent)
    out = np.zeros((rows, cols, 3), np.float32)
    n_u, n_v = (max(1, int(round(e / tile))) for e in extent)
    u_edges = np.linspace(0, cols, n_u + 1).astype(int)
    v_edges = np.linspace(0, rows, n_v + 1).astype(int)
    for i in range(n_v):
        for j in range(n_u):
            h, w = v_edges[i + 1] - v_edges[i], u_edges[j + 1] - u_edges[j]
            photo = photos[rng.integers(len(photos))]
            ph, pw = photo.shape[:2]
            scale = rng.uniform(0.5, 1.0)
            ch, cw = max(8, int(ph * scale)), max(8, int(pw * scale))
            top, left = rng.integers(0, ph - ch + 1), rng.integers(0, pw - cw + 1)
            crop = photo[top : top + ch, left : left + cw]
            if rng.random() < 0.5:
                crop = crop[:, ::-1]
            out[v_edges[i] : v_edges[i + 1], u_edges[j] : u_edges[j + 1]] = resize(
                crop, (h, w), anti_aliasing=True, preserve_range=True
            ).astype(np.float32)
    return out


def _shrink(photo: np.ndarray, side: int) -> np.ndarray:
    """``photo`` with its longer side at most ``side`` px (anti-aliased)."""
    from skimage.transform import resize

    h, w = photo.shape[:2]
    if max(h, w) <= side:
        return photo
    f = side / max(h, w)
    return resize(photo, (max(8, round(h * f)), max(8, round(w * f))), anti_aliasing=True, preserve_range=True).astype(np.float32)


def make_room(size: tuple[float, float, float], tile: float, texels_per_metre: float, seed: int) -> Room:
    """The room of ``size`` metres papered with bundled photos (deterministic in ``seed``)."""
    rng = np.random.default_rng(seed)
    side = int(np.ceil(2 * tile * texels_per_metre))  # a crop of half a photo still has a texel per pixel
    photos = [_shrink(to_rgb_float(BUNDLED_SOURCES[name]()), side) for name in TEXTURE_PHOTOS]
    textures = []
    for axis in range(3):
        for _upper in (False, True):
            textures.append(_mosaic(_face_extent(size, axis), tile, texels_per_metre, photos, rng))
    return Room(tuple(float(s) for s in size), tuple(textures), float(texels_per_metre))


def look_at(centre: np.ndarray, forward: np.ndarray, up: tuple[float, float, float] = (0.0, 0.0, 1.0)) -> tuple[np.ndarray, np.ndarray]:
    """(R, t) of a camera at ``centre`` looking along ``forward`` with image-down along -``up``."""
    z = np.asarray(forward, np.float64) / np.linalg.norm(forward)
    down = -np.asarray(up, np.float64)
    y = down - z * (down @ z)
    y /= np.linalg.norm(y)
    x = np.cross(y, z)
    rot = np.stack([x, y, z])
    return rot, -rot @ np.asarray(centre, np.float64)


def render(room: Room, rot: np.ndarray, trans: np.ndarray, width: int, height: int, focal: float, supersample: int = 2) -> np.ndarray:
    """The (height, width, 3) view in [0, 1] of a PINHOLE camera (fx = fy = ``focal``, centred principal point)."""
    from scipy.ndimage import map_coordinates

    s = int(supersample)
    offsets = (np.arange(s) + 0.5) / s
    us = (np.arange(width)[:, None] + offsets[None, :]).reshape(-1)
    vs = (np.arange(height)[:, None] + offsets[None, :]).reshape(-1)
    uu, vv = np.meshgrid(us, vs)
    rays_cam = np.stack([(uu - width / 2) / focal, (vv - height / 2) / focal, np.ones_like(uu)], axis=-1).reshape(-1, 3)
    rays = rays_cam @ rot  # R^T d for each row d
    centre = -rot.T @ trans
    size = np.asarray(room.size)
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = np.where(rays > 0, size[None, :], 0.0)
        t_axis = (bound - centre[None, :]) / rays
    t_axis = np.where(np.isfinite(t_axis) & (t_axis > 0), t_axis, np.inf)
    axis = np.argmin(t_axis, axis=1)
    t_hit = t_axis[np.arange(len(rays)), axis]
    points = centre[None, :] + t_hit[:, None] * rays
    colour = np.zeros((len(rays), 3), np.float32)
    for a in range(3):
        u_ax, v_ax = [b for b in range(3) if b != a]
        for upper in (False, True):
            mask = (axis == a) & ((rays[:, a] > 0) == upper)
            if not mask.any():
                continue
            tex = room.textures[face_index(a, upper)]
            col = points[mask, u_ax] * room.texels_per_metre - 0.5
            row = points[mask, v_ax] * room.texels_per_metre - 0.5
            for c in range(3):
                colour[mask, c] = map_coordinates(tex[..., c], [row, col], order=1, mode="nearest")
    image = colour.reshape(height, s, width, s, 3).mean(axis=(1, 3))
    return np.clip(image, 0.0, 1.0).astype(np.float32)
