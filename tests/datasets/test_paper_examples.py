"""Every paper-table config (examples/paper/) runs through the matrix at fixture scale.

Each config is loaded as shipped, its dataset root pointed at a fixture written in the
dataset's native layout, and only SIZES shrunk by ``--set``-style overrides (networks of a
few steps, dictionaries of 64 words, 2-4 places, 512-bit keys): the protocol of each table
(defenses, attacks, metrics, sweeps) is the one a user runs at full scale. A config that
gains a sweep or an attack without a fixture-scale override here shows up as a slow test.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from dataset_layouts import (
    PHOTOS,
    photo,
    save,
    write_celeba_layout,
    write_feature_file,
    write_geotagged_photos,
    write_scene_tree,
)

from vispriv.harness.config import load_config
from vispriv.harness.matrix import build_matrix
from vispriv.harness.registry import load_registry
from vispriv.harness.report import write_report
from vispriv.harness.runner import run_matrix
from vispriv.harness.tracking import Tracker

PAPER = Path(__file__).parents[2] / "examples" / "paper"
#: The two localisation tables are written and tested by the localisation scenario's own tests.
ELSEWHERE = {"ldp_feat_table2_localisation", "ldp_feat_table3_ablation"}

TINY_NET = {"network.steps": 2, "network.crop": 32, "network.depth": 3, "network.max_minutes": 1}


def write_class_folders(root: Path, classes: int = 3, per_class: int = 16, side: int = 24) -> Path:
    """``<root>/<class>/<n>.jpg``: one class per bundled photo, crops at random places (Caltech's layout)."""
    rng = np.random.default_rng(0)
    for c in range(classes):
        base = photo(PHOTOS[c], 120, 120)
        for i in range(per_class):
            top, left = rng.integers(0, 120 - side, size=2)
            save(base[top : top + side, left : left + side], root / f"class_{c}" / f"{i:03d}.jpg")
    return root


def write_three_roles(root: Path) -> dict[str, Path]:
    """LDP-Feat's three data roles: training scenes (MegaDepth-style tree), database photos, test photos."""
    rng = np.random.default_rng(1)
    folders = {"root": write_scene_tree(root / "MegaDepth_v1"), "database_root": root / "places", "test_root": root / "holiday"}
    for key, names in (("database_root", PHOTOS[:3]), ("test_root", PHOTOS[3:5])):
        for name in names:
            base = photo(name, 200, 200)
            for i in range(2):
                top, left = rng.integers(0, 150, size=2)
                save(base[top : top + 48, left : left + 48], folders[key] / f"{name}_{i}.jpg")
    return folders


def _roots(write):
    """The dataset-root overrides of a fixture writer (one ``root``, or the dict of roles it returns)."""
    def roots(folder: Path) -> list[str]:
        written = write(folder)
        return [f"datasets.0.{k}={v}" for k, v in (written if isinstance(written, dict) else {"root": written}).items()]
    return roots


def _net(prefix: str) -> list[str]:
    return [f"{prefix}.{k}={v}" for k, v in TINY_NET.items()]


SCENE = ["datasets.0.size=48", "datasets.0.limit=6", "datasets.0.sift.max_keypoints=64"]
ALBUM = ["datasets.0.n_places=6", "datasets.0.collection=[single, R-2, albums]", "datasets.0.n_albums=4",
         "datasets.0.features=handcrafted", "datasets.0.test_fraction=0.5"]
CALTECH = ["datasets.0.size=8", "datasets.0.n_users=3"]
#: The four defenses of every DPHE feature table, at fixture scale (2 rounds, 512-bit keys, short PRR10).
DPHE_FEATURES = ["datasets.0.n_users=3", "defenses.0.rounds=2", "defenses.1.rounds=2", "defenses.1.key_bits=512",
                 "defenses.2.rounds=2", "defenses.3.key_bits=512", "defenses.3.local_epochs=5"]


def _feature_file(**labels):
    """A fixture writer of the feature-file layout (``features`` is the dataset key it fills)."""
    return lambda folder: {"features": write_feature_file(folder / "features.npz", **labels)}

#: config -> (fixture writer, overrides that shrink sizes only, cells expected)
CASES = {
    "ldp_feat_table1_inversion": (
        write_three_roles,
        [*SCENE, "defenses.1.m=[2]", "defenses.1.database_size=64",
         "attacks.3.chain.0.database_size=64", "attacks.4.chain.0.database_size=64",
         *_net("attacks.1"), *_net("attacks.2.chain.1"), *_net("attacks.3.chain.1"), *_net("attacks.4.chain.1"),
         *_net("attacks.5")],
        7,
    ),
    "ldp_feat_table4_ldp_inversion": (
        write_three_roles,
        [*SCENE, "defenses.0.dictionary_size=64", "defenses.0.epsilon=[10.0]", "defenses.0.m=[2]",
         "defenses.0.quantiser=exact", "defenses.1.dictionary_size=128", "defenses.1.epsilon=[16.0]",
         "defenses.1.quantiser=exact", "attacks.1.defense.quantiser=exact", *_net("attacks.1")],
        4,
    ),
    "dphe_table1_caltech": (
        write_class_folders,
        [*CALTECH, "defenses.0.rounds=2", "defenses.1.rounds=2", "defenses.1.key_bits=512",
         "defenses.2.rounds=2", "defenses.3.key_bits=512", "defenses.3.local_epochs=5"],
        4,
    ),
    "dphe_table2_sparsity": (
        write_class_folders, [*CALTECH, "defenses.0.rounds=2", "defenses.0.key_bits=512", "defenses.0.reg=[0.0, 0.3]"], 2,
    ),
    "dphe_table1_features": (_feature_file(classes=3), DPHE_FEATURES, 4),
    "dphe_table3_celeba": (write_celeba_layout, DPHE_FEATURES, 4),
    "dphe_table4_sensitive_places": (_feature_file(attributes=1), [*DPHE_FEATURES, "datasets.0.test_fraction=0.25",
                                                                   "datasets.0.init_fraction=0.1"], 4),
    "dphe_table5_video_attributes": (_feature_file(attributes=12), DPHE_FEATURES, 4),
    # none and dphe x centroid-leakage; gradient-leakage does not apply to centroids (skipped)
    "dphe_table6_clustering": (_feature_file(classes=3), ["datasets.0.n_users=3", "defenses.0.rounds=2",
                                                          "defenses.1.rounds=2", "defenses.1.key_bits=512"], 2),
    "album_table1_geolocation": (write_geotagged_photos, ALBUM, 3),
    "album_table2_min_deletions": (
        write_geotagged_photos, [*ALBUM, "datasets.0.collection=[R-2]", "defenses.0.time_limit=5"], 4,
    ),
    "album_table3_budget": (
        write_geotagged_photos, [*ALBUM, "datasets.0.collection=[R-2]", "defenses.0.budget=[0.5]", "defenses.0.time_limit=5"], 2,
    ),
    # the shipped budgets 12.5 / 25 / 50 % delete 1 / 2 / 4 photos; 2 places leave about 16 test photos in each
    "album_table4_budget_deletions": (
        write_geotagged_photos, [*ALBUM, "datasets.0.n_places=2", "datasets.0.collection=[R-8]", "defenses.0.time_limit=5"], 6,
    ),
}


def test_every_paper_config_has_a_fixture_case():
    shipped = {p.stem for p in PAPER.glob("*.yaml")} - ELSEWHERE
    assert shipped == set(CASES)


@pytest.fixture(scope="module")
def registry():
    return load_registry(strict=True)


@pytest.fixture(scope="module")
def tracker(tmp_path_factory):
    return Tracker(f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_paper_config_runs_at_fixture_scale(name, registry, tracker, tmp_path, monkeypatch):
    write, overrides, cells = CASES[name]
    roots = _roots(write)(tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    config = load_config(PAPER / f"{name}.yaml", [*roots, *overrides])
    matrix = build_matrix(config, registry)
    assert len(matrix.cells) == cells, [c.label for c in matrix.cells]
    result = run_matrix(config, matrix, tracker, quiet=True, cache_dir=str(tmp_path / "cache"))
    assert not result.failed, [(c.label, o.error) for c, o in result.failed]
    assert len(result.finished) == cells
    if name in REPORTS:
        REPORTS[name](tracker, config.name, tmp_path / "report")


def _table4_report(tracker: Tracker, experiment: str, out: Path) -> None:
    """The report command of the config's header gives Table 4: one row per method, the two budget pairs."""
    files = write_report(tracker, experiment, out, ["protected_k"], log_to_parent=False,
                         budget_deletions=[(["dataset.collection", "defense.mode"], "defense.budget")],
                         budget_pairs=[("0.125", "0.25"), ("0.25", "0.5")])
    assert "| collection, mode \\ budget | 0.125 → 0.25 | 0.25 → 0.5 |" in files.markdown
    # greedy deletes the photos with the highest true-place scores first: nested sets, every album counted
    assert "| collection=R-8, mode=greedy-budget | 0.000 ± 0.000 (n = 4) | 0.000 ± 0.000 (n = 4) |" in files.markdown
    assert "| collection=R-8, mode=milp-budget | " in files.markdown


def _table6_report(tracker: Tracker, experiment: str, out: Path) -> None:
    """The header's report command gives Table 6: one AMI per method, DPHE's equal to plain k-means'."""
    files = write_report(tracker, experiment, out, ["utility/ami", "utility/update_sparsity"], log_to_parent=False)
    section = files.markdown.split("**utility/ami**", 1)[1].split("**utility/", 1)[0]
    assert re.search(r"\| attack \\ defense \| dphe(\([^|]*\))? \| none(\([^|]*\))? \|", section), section
    row = re.search(r"\| centroid-leakage \| (-?\d\.\d{3}) \| (-?\d\.\d{3}) \|", section)
    assert row and row[1] == row[2], section


#: config -> a check of its report (the command in the config's header)
def _utility_report(*metrics: str):
    """The header's report command gives one number per defense for each of the table's measures."""
    def check(tracker: Tracker, experiment: str, out: Path) -> None:
        files = write_report(tracker, experiment, out, list(metrics), log_to_parent=False)
        for metric in metrics:
            section = files.markdown.split(f"**{metric}**", 1)[1].split("**utility/", 1)[0]
            rows = [line for line in section.splitlines() if line.startswith(("| none", "| dphe", "| ra12", "| prr10"))]
            assert len(rows) == 4 and all(re.search(r"\| \d\.\d{3}", row) for row in rows), section
    return check


REPORTS = {
    "album_table4_budget_deletions": _table4_report,
    "dphe_table1_features": _utility_report("utility/test_accuracy"),
    "dphe_table3_celeba": _utility_report("utility/test_accuracy", "utility/average_precision"),
    "dphe_table4_sensitive_places": _utility_report("utility/average_precision"),
    "dphe_table5_video_attributes": _utility_report("utility/map_top10"),
    "dphe_table6_clustering": _table6_report,
}
