"""Reader of a visual localisation benchmark in hloc's layout (Aachen Day-Night, Cambridge Landmarks).

Layout read (names in the model and in the query list are paths relative to ``images/``)::

    <root>/images/...                      reference and query photos
    <root>/sparse/  or  <root>/sparse/0/   COLMAP model of the reference images: cameras, images,
                                           points3D as .bin or .txt, as COLMAP / pycolmap write it
                                           (COLMAP >= 3.12 models with rigs and frames too)
    <root>/queries_with_intrinsics.txt     one query a line: ``name MODEL width height params...``
                                           (COLMAP camera model names, e.g. ``SIMPLE_RADIAL``)
    <root>/<poses file>                    optional ground-truth query poses, one of
        ``hloc``      ``name qw qx qy qz tx ty tz``: cam_from_world (COLMAP's images.txt pose, the
                      format hloc writes and the visuallocalization.net benchmark takes);
        ``cambridge`` Cambridge Landmarks' ``dataset_test.txt``: three header lines, then
                      ``name X Y Z W P Q R``: camera centre and the world-to-camera rotation
                      as a quaternion (VisualSFM's convention).

The model is read with pycolmap (COLMAP's own bindings); only the reference images' poses and
intrinsics are used: the map's 3D points are re-triangulated from SIFT extracted by the
scenario itself (:mod:`.map`), as LDP-Feat section 6.2 does for Aachen. Aachen
publishes no query poses (its benchmark is evaluated online): without a poses file the utility
reports registration and inlier counts only. Every layout fault is one :class:`InputError`
naming the file and what is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vispriv.harness.errors import ConfigError, InputError

QUERIES_FILE = "queries_with_intrinsics.txt"
LAYOUT = "images/, sparse/ (a COLMAP model, .bin or .txt) and queries_with_intrinsics.txt"


@dataclass(frozen=True)
class View:
    """One photo of the benchmark: its name under ``images/``, its COLMAP camera and, if known, its pose.

    ``camera`` is ``(model, width, height, params)``; ``rotation`` / ``translation`` are
    cam_from_world (``x_cam = R x_world + t``), ``None`` for a query without ground truth.
    """

    name: str
    camera: tuple[str, int, int, tuple[float, ...]]
    rotation: np.ndarray | None = None
    translation: np.ndarray | None = None

    @property
    def centre(self) -> np.ndarray:
        """The camera centre in world coordinates, ``-R^T t``."""
        if self.rotation is None or self.translation is None:
            raise InputError(f"view {self.name!r} has no pose")
        return -self.rotation.T @ self.translation


@dataclass
class Benchmark:
    """A localisation benchmark as read from disk: references (posed) and queries (maybe posed)."""

    root: Path
    references: list[View]
    queries: list[View]
    model_points: int = 0
    poses_format: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def images_dir(self) -> Path:
        return self.root / "images"

    def image_path(self, view: View) -> Path:
        return self.images_dir / view.name


def pycolmap_camera(camera: tuple[str, int, int, tuple[float, ...]]):  # type: ignore[no-untyped-def]
    """A ``pycolmap.Camera`` from ``(model, width, height, params)``."""
    import pycolmap

    model, width, height, params = camera
    return pycolmap.Camera(model=model, width=int(width), height=int(height), params=list(params))


def _camera_tuple(camera) -> tuple[str, int, int, tuple[float, ...]]:  # type: ignore[no-untyped-def]
    return (camera.model.name, int(camera.width), int(camera.height), tuple(float(p) for p in camera.params))


def model_folder(root: Path) -> Path:
    """``sparse/`` or ``sparse/0/``, whichever holds a COLMAP model; a one-line InputError otherwise."""
    sparse = root / "sparse"
    if not sparse.is_dir():
        raise InputError(f"localisation root {str(root)!r} has no sparse/ folder; expected {LAYOUT}")
    for folder in (sparse, sparse / "0"):
        if any((folder / f"images.{ext}").is_file() for ext in ("bin", "txt")):
            return folder
    raise InputError(
        f"{sparse} holds no COLMAP model: expected cameras, images and points3D as .bin or .txt "
        "(in sparse/ or sparse/0/)"
    )


def read_references(root: Path) -> tuple[list[View], int]:
    """The registered images of the COLMAP model under ``root/sparse`` as posed views, and its 3D point count."""
    import pycolmap

    folder = model_folder(root)
    try:
        rec = pycolmap.Reconstruction(str(folder))
    except Exception as exc:  # noqa: BLE001 -- any parser failure is "unreadable model"
        raise InputError(f"COLMAP model in {folder} cannot be read ({str(exc).splitlines()[0][:200]})") from None
    views = []
    for image_id in sorted(rec.images):
        image = rec.images[image_id]
        if not image.has_pose:
            continue
        pose = image.cam_from_world()
        views.append(View(image.name, _camera_tuple(rec.cameras[image.camera_id]), pose.rotation.matrix(), np.asarray(pose.translation)))
    if not views:
        raise InputError(f"COLMAP model in {folder} has no registered image; the map needs posed reference images")
    return views, rec.num_points3D()


def parse_camera(tokens: list[str], where: str) -> tuple[str, int, int, tuple[float, ...]]:
    """``MODEL width height params...`` checked against COLMAP's camera models (pycolmap)."""
    import pycolmap

    if len(tokens) < 4:
        raise InputError(f"{where}: expected 'name MODEL width height params...'; found {len(tokens) + 1} fields")
    model = tokens[0]
    try:
        expected = len(pycolmap.Camera.create_from_model_name(1, model, 1.0, 2, 2).params)
    except Exception:  # noqa: BLE001 -- pycolmap raises ValueError on unknown names
        raise InputError(f"{where}: unknown camera model {model!r}; use a COLMAP model name such as PINHOLE or SIMPLE_RADIAL") from None
    try:
        width, height = int(tokens[1]), int(tokens[2])
        params = tuple(float(p) for p in tokens[3:])
    except ValueError:
        raise InputError(f"{where}: width and height must be integers and params numbers; found {' '.join(tokens[1:])!r}") from None
    if len(params) != expected or width < 1 or height < 1 or not np.all(np.isfinite(params)):
        raise InputError(
            f"{where}: {model} needs width, height >= 1 and {expected} finite params; found {width}x{height} with {len(params)}"
        )
    return model, width, height, params


def read_queries(path: Path) -> list[View]:
    """Queries from ``queries_with_intrinsics.txt`` (``name MODEL w h params...``; # comments, blank lines skipped)."""
    if not path.is_file():
        raise InputError(f"no {path.name} in {str(path.parent)!r}; expected {LAYOUT}")
    views, seen = [], set()
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        tokens = line.split()
        if not tokens or tokens[0].startswith("#"):
            continue
        where = f"{path.name} line {number}"
        camera = parse_camera(tokens[1:], where)
        if tokens[0] in seen:
            raise InputError(f"{where}: query {tokens[0]!r} is listed twice")
        seen.add(tokens[0])
        views.append(View(tokens[0], camera))
    if not views:
        raise InputError(f"{path} lists no query; expected lines 'name MODEL width height params...'")
    return views


def quaternion_matrix(qw: float, qx: float, qy: float, qz: float) -> np.ndarray:
    """Rotation matrix of a (w, x, y, z) quaternion (normalised first)."""
    q = np.array([qw, qx, qy, qz], np.float64)
    norm = np.linalg.norm(q)
    if not np.isfinite(norm) or norm < 1e-12:
        raise InputError(f"quaternion {q.tolist()} is not a rotation")
    w, x, y, z = q / norm
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def read_poses(path: Path, fmt: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Ground-truth query poses as ``{name: (R, t)}`` cam_from_world, from an ``hloc`` or ``cambridge`` file."""
    if fmt not in ("hloc", "cambridge"):
        raise ConfigError(f"poses_format {fmt!r} is not known; choose hloc or cambridge")
    if not path.is_file():
        raise InputError(f"poses file {str(path)!r} does not exist")
    lines = path.read_text().splitlines()
    start = 3 if fmt == "cambridge" else 0
    poses = {}
    for number, line in enumerate(lines[start:], start=start + 1):
        tokens = line.split()
        if not tokens or tokens[0].startswith("#"):
            continue
        try:
            values = [float(v) for v in tokens[1:]]
        except ValueError:
            values = []
        if len(values) != 7 or not np.all(np.isfinite(values)):
            layout = "name qw qx qy qz tx ty tz" if fmt == "hloc" else "name X Y Z W P Q R"
            raise InputError(f"{path.name} line {number}: expected '{layout}' (7 finite numbers after the name)")
        if fmt == "hloc":
            rot, trans = quaternion_matrix(*values[:4]), np.array(values[4:])
        else:
            rot = quaternion_matrix(*values[3:])
            trans = -rot @ np.array(values[:3])
        poses[tokens[0]] = (rot, trans)
    return poses


def read_benchmark(root: str | Path, queries_file: str = QUERIES_FILE, poses_file: str | None = None, poses_format: str = "hloc") -> Benchmark:
    """The benchmark under ``root`` (module docstring); every layout fault is one InputError line."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise InputError(f"localisation root {str(root)!r} does not exist; expected a folder with {LAYOUT}")
    if not (root / "images").is_dir():
        raise InputError(f"localisation root {str(root)!r} has no images/ folder; expected {LAYOUT}")
    references, n_points = read_references(root)
    queries = read_queries(root / queries_file)
    missing = [v.name for v in references + queries if not (root / "images" / v.name).is_file()]
    if missing:
        raise InputError(f"{len(missing)} photo(s) named by the model or the query list are not under images/, e.g. {missing[0]!r}")
    bench = Benchmark(root, references, queries, n_points)
    if poses_file:
        poses = read_poses(root / poses_file, poses_format)
        bench.poses_format = poses_format
        bench.queries = [View(q.name, q.camera, *poses[q.name]) if q.name in poses else q for q in queries]
        unposed = sum(q.rotation is None for q in bench.queries)
        if unposed:
            bench.notes.append(f"{unposed} of {len(queries)} queries have no ground-truth pose in {poses_file}")
    return bench
