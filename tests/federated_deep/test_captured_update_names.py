"""A captured update's checks, called directly: each refusal's exact line, and what passes at the boundary.

tests/federated_deep/test_captured_update_checks.py runs the same files through ``vispriv matrix``;
here the readers are called on a plain module (``load_update``, ``count_classes``) and on one small
exported model (``read_captured``), so every message is pinned word for word in well under a second each.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from vispriv.harness.errors import InputError
from vispriv.plugins.federated.deep.captured_files import count_classes, load_update, read_captured

SAVE = "save one entry per trainable parameter, named as model.named_parameters() names it"


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 2, 3, padding=1), nn.Flatten(), nn.Linear(2 * 4 * 4, 3))


def _save(path: Path, state) -> str:
    torch.save(state, path)
    return str(path)


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: torch.full_like(p, float(i + 1)) for i, (k, p) in enumerate(model.named_parameters())}


def test_the_update_is_read_in_the_models_parameter_order_whatever_the_files(tmp_path):
    model = _model()
    state = _state(model)
    shuffled = dict(reversed(list(state.items())))
    vector = load_update(_save(tmp_path / "u.pt", shuffled), model)
    expected = np.concatenate([np.full(p.numel(), i + 1.0) for i, p in enumerate(model.parameters())])
    assert vector.dtype == np.float32 and vector.tolist() == expected.tolist()


def test_an_extra_parameter_name_is_refused_by_name(tmp_path):
    model = _model()
    path = _save(tmp_path / "u.pt", {**_state(model), "2.scale": torch.ones(1)})
    with pytest.raises(InputError) as err:
        load_update(path, model)
    assert str(err.value) == (f"update {path} does not match the model's parameters: missing [], "
                              f"unexpected ['2.scale']; {SAVE}")


def test_a_missing_parameter_is_refused_by_name(tmp_path):
    model = _model()
    state = _state(model)
    del state["0.bias"]
    path = _save(tmp_path / "u.pt", state)
    with pytest.raises(InputError) as err:
        load_update(path, model)
    assert str(err.value) == f"update {path} does not match the model's parameters: missing ['0.bias'], unexpected []; {SAVE}"


def test_the_wrapper_prefix_gets_its_hint_only_when_every_extra_name_carries_it(tmp_path):
    model = _model()
    prefixed = {f"module.{k}": v for k, v in _state(model).items()}
    path = _save(tmp_path / "ddp.pt", prefixed)
    with pytest.raises(InputError) as err:
        load_update(path, model)
    assert str(err.value) == (
        f"update {path}: its parameter names carry the 'module.' prefix of a (Distributed)DataParallel wrapper "
        "('module.0.weight'; the model's is '0.weight'): strip it before saving, "
        "{k.removeprefix('module.'): v for k, v in update.items()}"
    )
    # one extra name without the prefix: no wrapper, the plain mismatch
    mixed = _save(tmp_path / "mixed.pt", {**prefixed, "scale": torch.ones(1)})
    with pytest.raises(InputError, match=r"does not match the model's parameters: missing \['0.weight', '0.bias', "
                                         r"'2.weight'\], unexpected \['module.0.weight', 'module.0.bias', 'module.2.weight'\]"):
        load_update(mixed, model)
    # the prefixed names cover only some of the missing ones: no wrapper either
    partial = _save(tmp_path / "partial.pt", {k: v for k, v in prefixed.items() if k != "module.2.bias"})
    with pytest.raises(InputError, match="does not match the model's parameters"):
        load_update(partial, model)


def test_a_shape_mismatch_names_the_parameter_and_both_shapes(tmp_path):
    model = _model()
    state = _state(model)
    state["2.weight"] = torch.zeros(3, 31)
    path = _save(tmp_path / "u.pt", state)
    with pytest.raises(InputError) as err:
        load_update(path, model)
    assert str(err.value) == f"update {path}: 2.weight has shape (3, 31), the model's is (3, 32)"


def test_a_file_that_is_no_dict_is_refused(tmp_path):
    path = _save(tmp_path / "list.pt", [torch.zeros(1)])
    with pytest.raises(InputError) as err:
        load_update(path, _model())
    assert str(err.value) == f"update {path} must hold a dict {{parameter name: tensor}}; got list"


class OnlyBatchesOf(nn.Module):
    """A model that accepts batches of exactly ``n`` images (a statically exported program's behaviour)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n, self.head = n, nn.Linear(3 * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] != self.n:
            raise RuntimeError(f"expected a batch of {self.n}\nsecond line")
        return self.head(x.flatten(1))


def test_the_number_of_classes_and_each_refusal_of_a_batch(tmp_path):
    path = tmp_path / "model.pt2"
    assert count_classes(path, OnlyBatchesOf(2), 2, (3, 4, 4), (3, 4, 4), 2) == 5
    with pytest.raises(InputError) as err:
        count_classes(path, OnlyBatchesOf(1), 2, (3, 4, 4), (3, 4, 4), 1)
    assert str(err.value).startswith(f"model {path} was exported for batches of exactly 1 image(s) and batch_size is 2 "
                                     "(torch: expected a batch of 1): export it with a dynamic batch, ")
    assert str(err.value).endswith("or capture an update of 1 image(s) and set batch_size: 1")
    with pytest.raises(InputError) as err:  # the example batch is the one asked for: the shape is what is wrong
        count_classes(path, OnlyBatchesOf(3), 2, (3, 4, 4), (3, 4, 4), 2)
    assert str(err.value) == (f"model {path} does not accept a batch of 2 x (3, 4, 4) images (torch: expected a batch "
                              "of 3); its example input is 2 x (3, 4, 4): set image_shape: [C, H, W] to the images the model takes")


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("exported")
    model = _model()
    example = torch.rand(2, 3, 4, 4)
    torch.export.save(torch.export.export(model, (example,), dynamic_shapes=({0: torch.export.Dim("batch")},)),
                      out / "model.pt2")
    torch.save(_state(model), out / "update.pt")
    np.save(out / "images.npy", example.numpy())
    np.save(out / "labels.npy", np.array([2, 0]))
    np.save(out / "three_labels.npy", np.array([2, 0, 1]))
    np.save(out / "wrong_images.npy", np.zeros((2, 3, 4, 5), np.float32))
    return out


def test_captured_files_are_read_together_and_checked_against_each_other(exported):
    f = exported
    got = read_captured(str(f / "model.pt2"), str(f / "update.pt"), str(f / "images.npy"), str(f / "labels.npy"),
                        None, 2, 0)
    assert got.image_shape == (3, 4, 4) and got.n_classes == 3
    assert got.images.shape == (2, 4, 4, 3) and got.labels.tolist() == [2, 0]
    np.testing.assert_array_equal(got.images, np.load(f / "images.npy").transpose(0, 2, 3, 1))
    no_labels = read_captured(str(f / "model.pt2"), str(f / "update.pt"), str(f / "images.npy"), "", None, 2, 0)
    assert no_labels.labels.tolist() == [0, 0]
    with pytest.raises(InputError) as err:
        read_captured(str(f / "model.pt2"), str(f / "update.pt"), str(f / "wrong_images.npy"), "", None, 2, 0)
    assert str(err.value) == (f"images {f / 'wrong_images.npy'} have shape (2, 3, 4, 5); expected (2, 3, 4, 4) "
                              "(B, C, H, W as PyTorch holds them, B = batch_size)")
    with pytest.raises(InputError) as err:
        read_captured(str(f / "model.pt2"), str(f / "update.pt"), str(f / "images.npy"), str(f / "three_labels.npy"),
                      None, 2, 0)
    assert str(err.value) == f"labels {f / 'three_labels.npy'} have shape (3,); expected (2,)"
    with pytest.raises(InputError) as err:
        read_captured(str(f / "model.pt2"), str(f / "update.pt"), "", "", None, 2, 2)
    assert str(err.value) == "mean and std need one value per channel (3) each, or neither"
