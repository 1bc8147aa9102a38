"""The localisation reader: COLMAP models written by pycolmap itself, query lists, pose files, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release.localisation.reader import quaternion_matrix, read_benchmark, read_poses
from vispriv.plugins.descriptor_release.localisation.render import look_at
from vispriv.plugins.descriptor_release.localisation.scene import quaternion, write_model

CAMERA = ("PINHOLE", 64, 48, (50.0, 51.0, 32.0, 24.0))


def _poses() -> list[tuple[np.ndarray, np.ndarray]]:
    out = []
    for k, centre in enumerate(([1.0, 1.0, 1.5], [2.0, 1.5, 1.2], [3.0, 2.0, 1.8])):
        rot, trans = look_at(np.array(centre), np.array([np.cos(k), np.sin(k), 0.1]))
        out.append((rot, trans))
    return out


def _layout(root: Path, fmt: str, queries: str = "query/q.png PINHOLE 64 48 50 51 32 24\n") -> Path:
    names = [f"db/{i}.png" for i in range(3)]
    for name in [*names, "query/q.png"]:
        (root / "images" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "images" / name).write_bytes(b"")
    write_model(root / "sparse", names, _poses(), CAMERA, fmt)
    (root / "queries_with_intrinsics.txt").write_text(queries)
    return root


@pytest.mark.parametrize("fmt", ["bin", "txt"])
def test_reads_a_model_written_by_pycolmap(tmp_path: Path, fmt: str) -> None:
    root = _layout(tmp_path, fmt)
    assert {p.suffix for p in (root / "sparse").iterdir()} == {f".{fmt}"}
    bench = read_benchmark(root)
    assert [v.name for v in bench.references] == ["db/0.png", "db/1.png", "db/2.png"]
    for view, (rot, trans) in zip(bench.references, _poses()):
        assert view.camera == CAMERA
        np.testing.assert_allclose(view.rotation, rot, atol=1e-9)
        np.testing.assert_allclose(view.translation, trans, atol=1e-9)
    assert bench.model_points == 0
    assert [(q.name, q.camera, q.rotation) for q in bench.queries] == [("query/q.png", CAMERA, None)]


def test_a_model_in_sparse_0_is_found(tmp_path: Path) -> None:
    root = _layout(tmp_path, "bin")
    (root / "sparse" / "0").mkdir()
    for f in list((root / "sparse").glob("*.bin")):
        f.rename(root / "sparse" / "0" / f.name)
    assert len(read_benchmark(root).references) == 3


def test_missing_sparse_is_one_clear_error(tmp_path: Path) -> None:
    root = _layout(tmp_path, "bin")
    for f in (root / "sparse").iterdir():
        f.unlink()
    (root / "sparse").rmdir()
    with pytest.raises(InputError, match=r"has no sparse/ folder; expected images/, sparse/ \(a COLMAP model"):
        read_benchmark(root)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("query/q.png PINHOLE 64 48 50 51 32", "line 2: PINHOLE needs width, height >= 1 and 4 finite params; found 64x48 with 3"),
        ("query/q.png FISHY 64 48 50", "line 2: unknown camera model 'FISHY'"),
        ("query/q.png PINHOLE 64 forty 50 51 32 24", "line 2: width and height must be integers"),
        ("query/q.png", "line 2: expected 'name MODEL width height params...'"),
    ],
)
def test_malformed_queries_file_is_one_clear_error(tmp_path: Path, line: str, message: str) -> None:
    root = _layout(tmp_path, "txt", queries=f"# comment\n{line}\n")
    with pytest.raises(InputError) as err:
        read_benchmark(root)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_pose_files_hloc_and_cambridge(tmp_path: Path) -> None:
    rot, trans = _poses()[1]
    centre = -rot.T @ trans
    q = quaternion(rot)
    np.testing.assert_allclose(quaternion_matrix(*q), rot, atol=1e-12)
    (tmp_path / "gt.txt").write_text("a.png " + " ".join(map(str, [*q, *trans])) + "\n")
    (tmp_path / "dataset_test.txt").write_text("Cambridge\nImageFile, Camera Position [X Y Z W P Q R]\n\n"
                                               "a.png " + " ".join(map(str, [*centre, *q])) + "\n")
    for name, fmt in (("gt.txt", "hloc"), ("dataset_test.txt", "cambridge")):
        got_rot, got_trans = read_poses(tmp_path / name, fmt)["a.png"]
        np.testing.assert_allclose(got_rot, rot, atol=1e-9)
        np.testing.assert_allclose(got_trans, trans, atol=1e-9)
    (tmp_path / "bad.txt").write_text("a.png 1 0 0 0 1 2\n")
    with pytest.raises(InputError, match=r"bad\.txt line 1: expected 'name qw qx qy qz tx ty tz'"):
        read_poses(tmp_path / "bad.txt", "hloc")
