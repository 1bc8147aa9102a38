"""Seeds derive from what a config changes: a new defaulted field or another folder keeps them."""

from __future__ import annotations

from typing import Annotated

from core_helpers import toy_config
from pydantic import Field

from vispriv.harness import FolderPath, PluginConfig, UtilityOnly
from vispriv.harness.config import validate_config
from vispriv.harness.matrix import Stage, build_matrix
from vispriv.harness.seeds import chain_seeds, seed_identity, stage_seed_key


class Inner(PluginConfig):
    sigma: float = 0.5


class Before(PluginConfig):
    root: FolderPath = ""
    k: int = 3
    inner: Inner = Inner()


class After(PluginConfig):
    """``Before`` plus one field with a default and one nested field with a default."""

    root: FolderPath = ""
    k: int = 3
    new_flag: bool = Field(False)
    inner: Inner = Inner()


def test_identity_holds_only_changed_values_and_no_folders(tmp_path):
    (tmp_path / "a").mkdir()
    assert seed_identity(Before()) == {}
    assert seed_identity(Before(k=4, inner=Inner(sigma=0.1), root=str(tmp_path / "a"))) == {"k": 4, "inner": {"sigma": 0.1}}
    assert seed_identity(Before(k=4)) == seed_identity(After(k=4))
    assert seed_identity(After(k=4, new_flag=True)) == {"k": 4, "new_flag": True}


class Evaluated(PluginConfig):
    """A release setting ``k`` and two settings only a utility evaluation reads."""

    k: int = 3
    ratio: Annotated[float, UtilityOnly] = Field(0.8, gt=0)
    matching: Annotated[Inner, UtilityOnly] = Inner()


def test_identity_leaves_out_utility_only_settings():
    assert seed_identity(Evaluated(ratio=0.7, matching=Inner(sigma=0.1))) == {}
    assert seed_identity(Evaluated(k=4, ratio=0.9)) == {"k": 4}
    assert Evaluated(ratio=0.7).model_dump() != Evaluated(ratio=0.9).model_dump()  # the cell hash still sees it


def test_chain_seeds_depend_on_earlier_stages_and_matrix_seed():
    a = chain_seeds(0, [["dataset", "d", {}], ["defense", "x", {"k": 1}]])
    b = chain_seeds(0, [["dataset", "d", {"n": 2}], ["defense", "x", {"k": 1}]])
    c = chain_seeds(1, [["dataset", "d", {}], ["defense", "x", {"k": 1}]])
    assert len(set(a) | set(b) | set(c)) == 6
    assert chain_seeds(0, [["dataset", "d", {}]]) == a[:1]


def test_cell_seeds_ignore_the_folder_but_the_hash_does_not(toy_registry, tmp_path, monkeypatch):
    (tmp_path / "photos").mkdir()
    monkeypatch.chdir(tmp_path)
    cells = {}
    for root in ("photos", str(tmp_path / "photos")):
        cfg = toy_config(datasets=[{"name": "image-folder", "root": root}], defenses=[{"name": "pixelate"}], attacks=[{"name": "as-released"}])
        cells[root] = build_matrix(validate_config(cfg), toy_registry).cells
    rel, absolute = cells["photos"], cells[str(tmp_path / "photos")]
    assert rel and len(rel) == len(absolute)
    assert [c.stage_seeds() for c in rel] == [c.stage_seeds() for c in absolute]
    assert [c.seed for c in rel] == [c.seed for c in absolute]
    assert {c.hash for c in rel}.isdisjoint({c.hash for c in absolute})


def test_stage_seed_key_of_a_default_config_is_its_name(toy_registry):
    cell = build_matrix(validate_config(toy_config()), toy_registry).cells[0]
    stage: Stage = cell.dataset
    assert stage_seed_key(stage.cls.kind, stage.name, stage.cls.Config()) == [stage.cls.kind, stage.name, {}]
    assert stage.seed_key() == stage_seed_key(stage.cls.kind, stage.name, stage.config)
