"""Deletion sets across budgets (`vispriv report --budget-deletions`): album pruning's Table 4.

The view's numbers are checked on masks whose fractions are known by hand; the defense's
kept masks on a matrix with two attacks (two cells that share one release); the whole path
through the CLI on a real sqlite MLflow store.
"""

from __future__ import annotations

import math
import os
import re
import subprocess

import numpy as np
import pytest
import yaml
from cli_fork import run_vispriv

from vispriv.harness.artifacts import KEPT_MASKS, kept_masks_csv, read_kept_masks
from vispriv.harness.config import validate_config
from vispriv.harness.errors import InputError, VisprivError
from vispriv.harness.execute import clear_memo
from vispriv.harness.matrix import build_matrix
from vispriv.harness.registry import load_registry
from vispriv.harness.report import CellRow, collect
from vispriv.harness.report.deletions import (
    deleted_then_kept,
    kept_masks,
    parse_pairs,
    parse_spec,
    tables,
    to_csv,
    to_markdown,
)
from vispriv.harness.runner import run_matrix
from vispriv.harness.tracking import Tracker


def _masks(**albums: str) -> dict[str, np.ndarray]:
    """album id -> kept mask from strings of 0/1 (``"1100"``: photos 0 and 1 kept)."""
    return {a: np.array([c == "1" for c in bits]) for a, bits in albums.items()}


# -- the fraction by hand ---------------------------------------------------------------
def test_fraction_by_hand():
    # a: deleted {2, 3} at the lower budget, the higher keeps 3 -> 1/2
    # b: deleted {0} at the lower budget, the higher deletes it again -> 0
    # c: deleted {0, 1, 2} at the lower budget, the higher keeps 0 and 2 -> 2/3
    # d: deleted nothing at the lower budget -> left out
    low = _masks(a="1100", b="0111", c="0001", d="1111")
    high = _masks(a="1001", b="0011", c="1010", d="0011")
    change = deleted_then_kept(low, high)
    values = np.array([1 / 2, 0.0, 2 / 3])
    assert change.n == 3 and change.n_nothing_deleted == 1
    assert change.mean == pytest.approx(values.mean())
    assert change.se == pytest.approx(values.std(ddof=1) / math.sqrt(3))
    assert change.pooled == pytest.approx(3 / 6)  # 1 + 0 + 2 kept of 2 + 1 + 3 deleted
    assert deleted_then_kept(low, low).mean == 0.0  # nested sets: nothing comes back


def test_one_album_has_no_standard_error_and_none_no_mean():
    one = deleted_then_kept(_masks(a="01"), _masks(a="10"))
    assert (one.mean, one.se, one.n) == (1.0, None, 1)
    none = deleted_then_kept(_masks(a="11"), _masks(a="00"))
    assert none.mean is None and none.n_nothing_deleted == 1 and "n = 0" in none.text()


def test_masks_over_different_albums_are_refused():
    with pytest.raises(VisprivError, match="different albums"):
        deleted_then_kept(_masks(a="10"), _masks(b="10"))
    with pytest.raises(VisprivError, match="album 'a' has 2 photos in one kept mask and 3"):
        deleted_then_kept(_masks(a="10"), _masks(a="100"))


def test_kept_masks_csv_round_trip_and_bad_files(tmp_path):
    path = tmp_path / KEPT_MASKS
    path.write_text(kept_masks_csv(["R-8-0", "R-8-1"], [np.array([1, 0, 1], bool), np.array([0], bool)]))
    assert path.read_text().splitlines() == ["album,photo,kept", "R-8-0,0,1", "R-8-0,1,0", "R-8-0,2,1", "R-8-1,0,0"]
    masks = read_kept_masks(path)
    assert list(masks) == ["R-8-0", "R-8-1"] and masks["R-8-0"].tolist() == [True, False, True]
    for text, match in (("id,kept\n", "columns album,photo,kept"), ("album,photo,kept\na,0,2\n", "line 2"),
                        ("album,photo,kept\na,1,1\n", "out of order")):
        path.write_text(text)
        with pytest.raises(InputError, match=match):
            read_kept_masks(path)


# -- the table from cells ---------------------------------------------------------------
def _row(run_id: str, collection: str, mode: str, budget: str, attack: str = "proxy-geolocator") -> CellRow:
    params = {"dataset": "album-photos", "dataset.collection": collection, "defense": "album-pruning",
              "defense.mode": mode, "defense.budget": budget, "attack": attack}
    return CellRow(run_id=run_id, scenario="album-sharing", dataset=f"album-photos(collection={collection})",
                   defense=f"album-pruning(budget={budget},mode={mode})", attack=attack, params=params,
                   metrics={}, higher_is_better={}, artifact_uri="")


def test_table_rows_columns_and_values_by_hand():
    rows = [_row(f"{c}{m}{b}", c, m, b) for c in ("R-16", "R-128") for m in ("milp-budget", "greedy-budget")
            for b in ("0.125", "0.25", "0.5")]
    masks = {}
    for r in rows:
        deleted = {"0.125": 1, "0.25": 2, "0.5": 3}[r.params["defense.budget"]]
        if r.params["defense.mode"] == "greedy-budget":  # nested: delete the first photos
            masks[r.run_id] = {"x": np.arange(4) >= deleted, "y": np.arange(4) >= deleted}
        else:  # the MILP moves: at 0.25 it deletes photos 2, 3 (photo 0 comes back), at 0.5 photos 0, 1, 2
            keep = {"0.125": "0111", "0.25": "1100", "0.5": "0001"}[r.params["defense.budget"]]
            masks[r.run_id] = _masks(x=keep, y=keep)
    rows.append(_row("extra", "R-16", "milp-budget", "0.25", attack="other"))  # a second attack: same release
    masks["extra"] = masks["R-16milp-budget0.25"]
    (table,) = tables(rows, masks, ["dataset.collection", "defense.mode"], "defense.budget", parse_pairs("0.125:0.25,0.25:0.5"))
    assert table.rows == ["collection=R-16, mode=greedy-budget", "collection=R-16, mode=milp-budget",
                          "collection=R-128, mode=greedy-budget", "collection=R-128, mode=milp-budget"]
    low_pair, high_pair = table.pairs
    milp = table.cells[("collection=R-16, mode=milp-budget", low_pair)]
    assert (milp.mean, milp.se, milp.n) == (1.0, 0.0, 2)  # photo 0, deleted at 0.125, kept at 0.25 in both albums
    upper = table.cells[("collection=R-16, mode=milp-budget", high_pair)]
    assert upper.mean == pytest.approx(0.5) and upper.n == 2  # {2, 3} deleted at 0.25; 0.5 keeps 3
    greedy = table.cells[("collection=R-128, mode=greedy-budget", high_pair)]
    assert (greedy.mean, greedy.n) == (0.0, 2)
    md = to_markdown(table)
    assert "| collection, mode \\ budget | 0.125 → 0.25 | 0.25 → 0.5 |" in md
    assert "| collection=R-16, mode=milp-budget | 1.000 ± 0.000 (n = 2) | 0.500 ± 0.000 (n = 2) |" in md
    lines = to_csv([table]).splitlines()
    assert lines[0].startswith("scenario,row,budget_param,budget_low,budget_high,mean,se,n_albums")
    assert "album-sharing,\"collection=R-16, mode=milp-budget\",defense.budget,0.125,0.25,1.0,0.0,2,0,1.0" in lines
    # by default each budget with the next one that ran: 0.125 -> 0.25 and 0.25 -> 0.5
    (default,) = tables(rows, masks, ["dataset.collection", "defense.mode"], "defense.budget")
    assert default.pairs == [("0.125", "0.25"), ("0.25", "0.5")]


def test_table_errors_are_one_line():
    rows = [_row("a", "R-16", "milp-budget", "0.125"), _row("b", "R-16", "milp-budget", "0.25")]
    masks = {"a": _masks(x="01"), "b": _masks(x="10")}
    with pytest.raises(VisprivError, match=re.escape("no cell has param 'defense.k'")):
        tables(rows, masks, ["dataset.collection"], "defense.k")
    with pytest.raises(VisprivError, match=re.escape("logged no kept_masks.csv; only album-pruning cells")):
        tables(rows, {"a": masks["a"]}, ["dataset.collection"], "defense.budget")
    with pytest.raises(VisprivError, match="different albums"):
        tables(rows, {"a": masks["a"], "b": _masks(z="10")}, ["dataset.collection"], "defense.budget")
    with pytest.raises(VisprivError, match=re.escape("differ in defense.mode: add it to the rows")):
        tables([*rows, _row("c", "R-16", "greedy-budget", "0.125")], {**masks, "c": masks["a"]},
               ["dataset.collection"], "defense.budget")
    with pytest.raises(VisprivError, match=re.escape("no dataset.* or defense.* param")):
        tables(rows, masks, ["attack.model"], "defense.budget")
    with pytest.raises(VisprivError, match=r"different kept masks .* pick one run with --parent"):
        tables([*rows, _row("a2", "R-16", "milp-budget", "0.125", attack="other")], {**masks, "a2": _masks(x="10")},
               ["dataset.collection"], "defense.budget")
    with pytest.raises(VisprivError, match="ran one value"):
        tables(rows[:1], masks, ["dataset.collection"], "defense.budget")
    with pytest.raises(VisprivError, match="ran both budgets of any pair"):
        tables(rows, masks, ["dataset.collection"], "defense.budget", [("0.125", "0.5")])
    with pytest.raises(VisprivError, match="expected ROW1,ROW2:BUDGET"):
        parse_spec("defense.budget")
    with pytest.raises(VisprivError, match="must be below"):
        parse_pairs("0.25:0.125")
    with pytest.raises(VisprivError, match="expected LOW:HIGH"):
        parse_pairs("0.125-0.25")


# -- the defense logs its masks; the CLI reads them back --------------------------------
def _album_config(**overrides) -> dict:
    return {
        "name": "album-t4",
        "seed": 0,
        "datasets": [{"name": "album-world", "n_places": 8, "dim": 8, "collection": "R-8", "n_albums": 6,
                      "train_per_place": 20, "epochs": 2}],
        "defenses": [{"name": "album-pruning", "mode": ["milp-budget", "greedy-budget"], "budget": [0.125, 0.25, 0.5],
                      "scores_from": "adversary", "time_limit": 5}],
        "attacks": [{"name": "proxy-geolocator", "model": ["adversary", "proxy"]}],
        "metrics": ["protected-k"],
        **overrides,
    }


def test_every_cell_that_shares_a_release_logs_its_masks(tmp_path):
    clear_memo()
    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    cfg = validate_config(_album_config(defenses=[{"name": "album-pruning", "mode": "greedy-budget", "budget": 0.25}]))
    result = run_matrix(cfg, build_matrix(cfg, load_registry(strict=True)), tracker, quiet=True,
                        cache_dir=str(tmp_path / "cache"))
    assert len(result.finished) == 2 and not result.failed  # two attacks, one release
    rows = collect(tracker, "album-t4")
    masks = kept_masks(tracker, rows)
    assert set(masks) == {r.run_id for r in rows}
    first, second = masks.values()
    assert list(first) == [f"R-8-{i}" for i in range(6)]
    for album, keep in first.items():
        assert len(keep) == 8 and int((~keep).sum()) == 2  # floor(0.25 * 8) deletions, greedy always spends them
        assert np.array_equal(keep, second[album])
    photos = [r.metrics["attack/photos_per_album"] for r in rows]
    assert photos == [6.0, 6.0]  # the release shows exactly the kept photos


def test_report_cli_gives_table4_from_a_real_store(tmp_path):
    config = tmp_path / "t4.yaml"
    config.write_text(yaml.safe_dump(_album_config(attacks=[{"name": "proxy-geolocator"}]), sort_keys=False))
    env = {**os.environ, "VISPRIV_PLUGINS": "album-sharing,metrics"}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return run_vispriv(args, cwd=tmp_path, env=env, timeout=600)

    ran = cli("matrix", str(config), "--quiet")
    assert ran.returncode == 0, ran.stderr
    spec = "dataset.collection,defense.mode:defense.budget"
    rep = cli("report", "--experiment", "album-t4", "--metric", "protected_k", "--budget-deletions", spec,
              "--budget-pairs", "0.125:0.25,0.25:0.5", "--format", "md", "--format", "csv", "--format", "html", "--no-log")
    assert rep.returncode == 0, rep.stderr
    assert "**Deleted at the lower budget, kept at the higher** (album-sharing" in rep.stdout
    assert "| collection, mode \\ budget | 0.125 → 0.25 | 0.25 → 0.5 |" in rep.stdout
    # greedy deletes the highest true-place scores first: its sets are nested, nothing comes back
    assert "| collection=R-8, mode=greedy-budget | 0.000 ± 0.000 (n = 6) | 0.000 ± 0.000 (n = 6) |" in rep.stdout
    lines = (tmp_path / "reports" / "budget_deletions.csv").read_text().splitlines()
    milp = [line.split(",") for line in lines if "mode=milp-budget" in line]
    assert len(milp) == 2 and all(0.0 <= float(f[-5]) <= 1.0 for f in milp)  # the mean, a fraction
    assert "deleted at the lower budget, kept at the higher" in (tmp_path / "reports" / "report.html").read_text()
    # the masks of the store, recomputed here, give the CLI's numbers
    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    rows = collect(tracker, "album-t4")
    masks = kept_masks(tracker, rows)
    by = {(r.params["defense.mode"], r.params["defense.budget"]): masks[r.run_id] for r in rows}
    change = deleted_then_kept(by[("milp-budget", "0.125")], by[("milp-budget", "0.25")])
    assert float(milp[0][-5]) == pytest.approx(change.mean)
    bad = cli("report", "--experiment", "album-t4", "--budget-deletions", "dataset.collection:defense.epsilon", "--no-log")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert bad.stderr.startswith("error: --budget-deletions: no cell has param 'defense.epsilon'")
    lone = cli("report", "--experiment", "album-t4", "--budget-pairs", "0.125:0.25", "--no-log")
    assert lone.returncode == 2 and lone.stderr.strip() == "error: --budget-pairs needs --budget-deletions ROW,...:BUDGET"
