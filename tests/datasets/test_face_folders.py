"""face-folders: LFW person folders and CelebA's flat folder + identity file for the federated scenario."""

import json

import numpy as np
import pytest
from dataset_layouts import lfw_faces, save, write_celeba, write_lfw

from vispriv.harness import Cache, CellContext
from vispriv.harness.errors import ConfigError, InputError
from vispriv.plugins.federated.features.face_folders import FaceFolders, load_faces


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


def test_identities_of_two_photos_are_in_training_and_test(tmp_path):
    root = write_lfw(tmp_path / "lfw", people=5, per_person=2)
    for i, face in enumerate(lfw_faces()[60:66]):  # one person with 6 photos (the initialisation set's)
        save(np.repeat(face[..., None], 3, axis=2), root / "Big_Person" / f"Big_Person_{i + 1:04d}.jpg")
    ctx = CellContext(seed=0, cache=Cache(None), quiet=True)
    cfg = FaceFolders.Config(root=str(root), size=8, n_users=2, test_fraction=0.25, init_fraction=0.1)
    with pytest.warns(UserWarning, match="face-folders skipped"):
        scene = FaceFolders(cfg).load(ctx)
    data = scene.private
    assert data.class_names == ["Big_Person", "Person_0", "Person_1", "Person_2", "Person_3", "Person_4"]
    # Every two-photo identity: one photo in training, one in test (before: test 1, init 1, training 0).
    assert np.bincount(data.labels, minlength=6).tolist() == [3, 1, 1, 1, 1, 1]
    assert np.bincount(data.test_labels, minlength=6).tolist() == [2, 1, 1, 1, 1, 1]
    assert scene.public.init_labels.tolist() == [0]
    # min_images 1: the one-photo identity is in training only, and a warning says so.
    with pytest.warns(UserWarning, match=r"1 class\(es\) with a single image \(Lone_Person\) are in training only"):
        data = FaceFolders(cfg.model_copy(update={"min_images": 1})).load(ctx).private
    lone = data.class_names.index("Lone_Person")
    assert lone in data.labels and lone not in data.test_labels


def test_a_photo_in_a_nested_subfolder_counts_for_its_person(tmp_path):
    root = write_lfw(tmp_path / "lfw")
    face = np.repeat(lfw_faces()[90][..., None], 3, axis=2)
    save(face, root / "Person_1" / "extra" / "Person_1_0100.jpg")
    save(face, root / "Lone_Person" / "aligned" / "Lone_Person_0002.jpg")
    faces, skipped = load_faces(root, "lfw", size=8, min_images=2, crop_fraction=1.0)
    counts = dict(zip(faces.class_names, np.bincount(faces.labels).tolist()))
    assert counts == {"Lone_Person": 2, "Person_0": 4, "Person_1": 5, "Person_2": 4, "Person_3": 4}
    assert skipped["too_few_images"] == 0


def test_a_root_one_level_too_high_names_the_folder_meant(tmp_path):
    write_lfw(tmp_path / "data" / "lfw")
    with pytest.raises(ConfigError) as err:
        load_faces(tmp_path / "data", "lfw", 8, 2, 1.0)
    assert str(err.value) == (
        f"face-folders root '{tmp_path / 'data'}': found no images directly under identity folders; "
        f"did you mean '{tmp_path / 'data' / 'lfw'}'? (lfw layout: <root>/<Person_Name>/*.jpg)"
    )
    write_celeba(tmp_path / "downloads" / "celeba")
    with pytest.raises(InputError, match=f"did you mean '{tmp_path / 'downloads' / 'celeba'}'\\?$"):
        load_faces(tmp_path / "downloads", "celeba", 8, 2, 1.0)
