"""Labels and tables that name what they show when a matrix has several datasets.

Files are named by the shortest part that tells them apart (not by absolute paths of hundreds
of characters); progress lines and galleries name the dataset; datasets of one plugin share
one table; ``--table`` with the attack on one axis names it on that axis only and keeps the
standard errors.
"""

from __future__ import annotations

import re

from core_helpers import toy_config

from vispriv.harness import FilePath, PluginConfig
from vispriv.harness.config import validate_config
from vispriv.harness.matrix import build_matrix
from vispriv.harness.path_labels import shortest_parts, shown_paths
from vispriv.harness.report import collect, write_report
from vispriv.harness.report.gallery import collect_samples
from vispriv.harness.runner import run_matrix


class Capture(PluginConfig):
    model: FilePath
    update: FilePath
    images: FilePath = ""
    batch_size: int = 1


def test_a_path_is_named_by_its_stem_then_by_as_many_folders_as_tell_it_apart():
    assert shortest_parts(["/data/run/astronaut.pt", "/data/run/camera.pt"]) == {
        "/data/run/astronaut.pt": "astronaut", "/data/run/camera.pt": "camera"}
    assert shortest_parts(["/data/astronaut/update.pt", "/data/camera/update.pt"]) == {
        "/data/astronaut/update.pt": "astronaut/update", "/data/camera/update.pt": "camera/update"}
    assert shortest_parts(["/a/x/round1/update.pt", "/b/x/round1/update.pt"]) == {
        "/a/x/round1/update.pt": "a/x/round1/update", "/b/x/round1/update.pt": "b/x/round1/update"}
    assert shortest_parts(["/a/update.pt", "/a/update.pth"]) == {"/a/update.pt": "update.pt", "/a/update.pth": "update.pth"}
    assert shortest_parts(["/data/astronaut/update.pt"]) == {"/data/astronaut/update.pt": "update"}


def test_a_label_shows_the_one_path_that_tells_the_datasets_apart_and_leaves_out_shared_ones():
    def capture(client: str, **extra) -> Capture:
        return Capture(model="/srv/round3/model.pt2", update=f"/srv/round3/{client}/update.pt",
                       images=f"/srv/round3/{client}/images.npy", **extra)

    # The shared model tells no capture apart; update and images each do: the first, alone.
    assert shown_paths([capture("astronaut"), capture("camera")]) == [
        {"model": None, "update": "astronaut/update", "images": None},
        {"model": None, "update": "camera/update", "images": None}]
    # Both tell them apart and the images' parts are shorter (astronaut, 9 characters, against
    # astronaut/update, 16): the images are shown, the updates left out.
    by_name = [Capture(model="/srv/model.pt2", update=f"/srv/{c}/update.pt", images=f"/srv/images/{c}.npy")
               for c in ("astronaut", "camera")]
    assert shown_paths(by_name) == [{"model": None, "update": None, "images": "astronaut"},
                                    {"model": None, "update": None, "images": "camera"}]
    # One capture: each path by its stem.
    assert shown_paths([capture("astronaut")]) == [{"model": "model", "update": "update", "images": "images"}]
    # Same files, other settings: the settings tell them apart, no path does.
    assert shown_paths([capture("astronaut"), capture("astronaut", batch_size=2)]) == [
        {"model": None, "update": None, "images": None}, {"model": None, "update": None, "images": None}]
    # No one setting tells the three apart: both differing paths are shown.
    crossed = [Capture(model=f"/m/{m}.pt2", update=f"/u/{u}.pt") for m, u in [("m1", "u1"), ("m1", "u2"), ("m2", "u1")]]
    assert shown_paths(crossed) == [{"model": "m1", "update": "u1"}, {"model": "m1", "update": "u2"},
                                    {"model": "m2", "update": "u1"}]


def _two_datasets(toy_registry, tracker, tmp_path, quiet: bool = True, **overrides):
    cfg = validate_config(toy_config(datasets=[{"name": "toy-images", "n": [3, 2]}],
                                     defenses=[{"name": "toy-noise", "sigma": 0.05}], **overrides))
    run_matrix(cfg, build_matrix(cfg, toy_registry), tracker, quiet=quiet, cache_dir=str(tmp_path / "cache"))


def test_progress_lines_name_the_dataset_when_the_matrix_has_several(toy_registry, tracker, tmp_path, capsys):
    _two_datasets(toy_registry, tracker, tmp_path, quiet=False)
    lines = [re.sub(r"\(\d+ s\)", "(T s)", line) for line in capsys.readouterr().err.splitlines()
             if line.startswith("cells ")]
    assert sorted(lines) == ["cells 1/2 (T s): toy-images(n=3) | toy-noise(sigma=0.05) | toy-denoise",
                             "cells 2/2 (T s): toy-images(n=2) | toy-noise(sigma=0.05) | toy-denoise"]


def test_datasets_of_one_plugin_report_as_one_table_with_a_row_per_dataset(toy_registry, tracker, tmp_path):
    _two_datasets(toy_registry, tracker, tmp_path)
    ssim = {r.dataset: (r.metrics["images/ssim"], r.metrics["images/ssim_se"]) for r in collect(tracker, "toy")}
    out = write_report(tracker, "toy", tmp_path / "rep", ["images/ssim"], ["md", "csv"], log_to_parent=False, gallery=False)
    assert out.markdown.count("**images/ssim**") == 1
    table = [line for line in out.markdown.splitlines() if line.startswith("| ")]
    assert table == [
        "| dataset, attack \\ defense | toy-noise(sigma=0.05) |",
        *(f"| toy-images(n={n}), toy-denoise | {ssim[f'toy-images(n={n})'][0]:.3f} ± {ssim[f'toy-images(n={n})'][1]:.3f} |"
          for n in (2, 3))]
    csv_rows = (tmp_path / "rep" / "report.csv").read_text().splitlines()[1:]
    assert sorted(row.split(",")[:4] for row in csv_rows) == [
        ["toy: toy-images(n=2)", "images/ssim", "toy-denoise", "toy-noise(sigma=0.05)"],
        ["toy: toy-images(n=3)", "images/ssim", "toy-denoise", "toy-noise(sigma=0.05)"]]


def test_a_table_with_the_attack_on_one_axis_names_it_there_only_and_keeps_the_errors(toy_registry, tracker, tmp_path):
    _two_datasets(toy_registry, tracker, tmp_path, attacks=[{"name": "toy-denoise", "grid": [False, True]}])
    value = {(r.params["dataset.n"], r.attack): f"{r.metrics['images/ssim']:.3f} ± {r.metrics['images/ssim_se']:.3f}"
             for r in collect(tracker, "toy")}
    attacks = ["toy-denoise(grid=False)", "toy-denoise(grid=True)"]
    by_attack = write_report(tracker, "toy", tmp_path / "a", ["images/ssim"], log_to_parent=False, gallery=False,
                             tables=[(["dataset.n"], "attack")])
    assert [line for line in by_attack.markdown.splitlines() if line.startswith("| ")] == [
        f"| dataset.n \\ attack | {' | '.join(attacks)} |",
        *(f"| n={n} | {value[(n, attacks[0])]} | {value[(n, attacks[1])]} |" for n in ("2", "3"))]
    in_rows = write_report(tracker, "toy", tmp_path / "b", ["images/ssim"], log_to_parent=False, gallery=False,
                           tables=[(["attack"], "dataset.n")])
    assert [line for line in in_rows.markdown.splitlines() if line.startswith("| ")] == [
        "| attack \\ dataset.n | 2 | 3 |",  # both attacks give the same estimate: tied, both bold as the strongest
        *(f"| {a} | **{value[('2', a)]}** | **{value[('3', a)]}** |" for a in attacks)]


def test_galleries_of_several_datasets_name_their_dataset(toy_registry, tracker, tmp_path):
    _two_datasets(toy_registry, tracker, tmp_path, attacks=[{"name": "toy-denoise", "sample": True}])
    samples = collect_samples(tracker, collect(tracker, "toy"))
    assert {k: [s.label for s in v] for k, v in samples.items()} == {
        "toy: toy-images(n=2)": ["toy-denoise(sample=True) vs toy-noise(sigma=0.05) on toy-images(n=2)"],
        "toy: toy-images(n=3)": ["toy-denoise(sample=True) vs toy-noise(sigma=0.05) on toy-images(n=3)"]}
    out = write_report(tracker, "toy", tmp_path / "rep", ["images/ssim"], log_to_parent=False)
    titles = re.findall(r"\*\*Reconstructions side by side \(([^)]*\)?)\)\*\*", out.markdown)
    assert titles == ["toy: toy-images(n=2)", "toy: toy-images(n=3)"]


def test_the_html_table_header_names_its_rows_and_columns():
    from vispriv.harness.report.html import table_html
    from vispriv.harness.report.tables import Pivot

    p = Pivot("images/ssim", "toy", ["a"], ["b"], values={("a", "b"): 0.5}, row_title="dataset, attack", col_title="attack.steps")
    assert "<th>dataset, attack \\ attack.steps</th>" in table_html(p)
    assert "attack \\ defense" not in table_html(p)
