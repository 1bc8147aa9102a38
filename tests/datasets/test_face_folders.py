"""face-folders: LFW person folders and CelebA's flat folder + identity file for the federated scenario."""

import json

import numpy as np
import pytest
from dataset_layouts import write_celeba, write_lfw

from vispriv.harness import Cache, CellContext
from vispriv.harness.errors import InputError
from vispriv.plugins.federated.face_folders import FaceFolders, load_faces


@pytest.fixture(scope="module")
def lfw(tmp_path_factory):
    return write_lfw(tmp_path_factory.mktemp("lfw") / "lfw")


def test_lfw_people_are_classes_and_awkward_folders_are_counted(lfw):
    faces, skipped = load_faces(lfw, "lfw", size=16, min_images=2, crop_fraction=1.0)
    assert faces.class_names == ["Person_0", "Person_1", "Person_2", "Person_3"]
    assert np.bincount(faces.labels).tolist() == [4, 4, 4, 4] and faces.images.shape == (16, 16, 16)
    assert skipped == {"empty_person_folder": 1, "unreadable_image": 1, "no_identity": 0, "too_few_images": 1}
    # min_images 1 keeps the lone person; pixels are the grey photo, resized.
    faces, skipped = load_faces(lfw, "lfw", size=16, min_images=1, crop_fraction=1.0)
    assert "Lone_Person" in faces.class_names and skipped["too_few_images"] == 0
    assert faces.images.min() >= 0.0 and faces.images.max() <= 1.0


def test_users_by_identity_hold_only_their_own_people(lfw, tmp_path):
    ctx = CellContext(seed=0, cache=Cache(None), artifact_dir=tmp_path, quiet=True)
    cfg = FaceFolders.Config(root=str(lfw), size=12, n_users=2, split="by-class", test_fraction=0.25, init_fraction=0.1)
    with pytest.warns(UserWarning, match="face-folders skipped"):
        scene = FaceFolders(cfg).load(ctx)
    data = scene.private
    people = [set(data.labels[data.user_index == u].tolist()) for u in range(2)]
    assert people[0] and people[1] and not people[0] & people[1]
    assert data.image_shape == (12, 12) and data.n_classes == 4
    assert json.loads((tmp_path / "face_skips.json").read_text())["empty_person_folder"] == 1
    with pytest.warns(UserWarning):
        iid = FaceFolders(cfg.model_copy(update={"split": "iid"})).load(ctx).private
    assert any(len(set(iid.labels[iid.user_index == u].tolist())) > 1 for u in range(2))


def test_celeba_flat_folder_with_identity_file(tmp_path):
    root = write_celeba(tmp_path / "celeba")
    faces, skipped = load_faces(root, "celeba", size=8, min_images=2, crop_fraction=1.0)
    assert faces.class_names == ["100", "101", "102"] and np.bincount(faces.labels).tolist() == [4, 4, 4]
    assert skipped["no_identity"] == 1


def test_too_few_identities_is_one_line(tmp_path):
    (tmp_path / "lfw" / "Empty_Person").mkdir(parents=True)
    expected = (
        f"face-folders '{tmp_path / 'lfw'}' has 0 identities with >= 2 readable photos; need 2 "
        "(skipped: {'empty_person_folder': 1, 'unreadable_image': 0, 'no_identity': 0, 'too_few_images': 0})"
    )
    with pytest.raises(InputError) as err:
        load_faces(tmp_path / "lfw", "lfw", 8, 2, 1.0)
    assert str(err.value) == expected
