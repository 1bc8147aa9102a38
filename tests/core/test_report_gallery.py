"""The report's side-by-side reconstructions (issue 12: Raw, Database and LDP-Feat grids together)."""

from __future__ import annotations

import numpy as np
import pytest
from core_helpers import toy_config

from vispriv.harness import CellContext, Images
from vispriv.harness.artifacts import save_reconstruction_sample, spread_indices
from vispriv.harness.config import validate_config
from vispriv.harness.matrix import build_matrix
from vispriv.harness.report import collect, write_report
from vispriv.harness.report.gallery import Sample, collect_samples, gallery_pngs, merge_identical, ranked
from vispriv.harness.runner import run_matrix


def test_spread_indices_cover_first_and_last_evenly():
    assert spread_indices(64, 8).tolist() == [0, 9, 18, 27, 36, 45, 54, 63]
    assert spread_indices(5, 8).tolist() == [0, 1, 2, 3, 4]
    assert spread_indices(0, 8).tolist() == []


def _sample(label: str, noise: float, ids=("a", "b", "c")) -> Sample:
    rng = np.random.default_rng(0)
    truth = (np.tile(np.linspace(0, 255, 32), (len(ids), 32, 1))[..., None]).astype(np.uint8)
    estimate = np.clip(truth + rng.normal(0, noise, truth.shape), 0, 255).astype(np.uint8)
    return Sample(label, tuple(ids), truth, estimate)


def test_cells_are_ranked_by_their_samples_ssim_and_grouped_by_the_ids_they_show(tmp_path):
    noisy, clean, middle = _sample("noisy", 80.0), _sample("clean", 0.0), _sample("middle", 20.0)
    assert [s.label for _, s in ranked([noisy, clean, middle])] == ["clean", "middle", "noisy"]
    assert ranked([clean])[0][0] == pytest.approx(1.0)
    other = _sample("other crops", 5.0, ids=("x", "y"))
    written = gallery_pngs({"toy": [noisy, clean, other]}, tmp_path)
    assert [p.name for _, p in written] == ["gallery_toy.png", "gallery_toy_1.png"]
    assert all(p.stat().st_size > 0 for _, p in written)


def test_pixel_identical_rows_share_one_row_with_both_labels():
    a, b, c = _sample("flat vs none", 10.0), _sample("flat vs lifting", 10.0), _sample("attack vs lifting", 30.0)
    merged = merge_identical([a, b, c])
    assert [s.label for s in merged] == ["flat vs none (+1 identical)", "attack vs lifting"]


def test_sample_shapes_are_checked(tmp_path):
    with pytest.raises(ValueError, match="must both be"):
        save_reconstruction_sample(tmp_path / "s.npz", ["a"], np.zeros((1, 4, 4, 1)), np.zeros((1, 4, 4, 3)))


def test_report_stacks_every_cells_sample_under_the_truths(toy_registry, tracker, tmp_path):
    cfg = validate_config(toy_config(defenses=[{"name": "toy-noise", "sigma": [0.05, 0.2]}],
                                     attacks=[{"name": "toy-denoise", "sample": True}]))
    run_matrix(cfg, build_matrix(cfg, toy_registry), tracker, quiet=True, cache_dir=str(tmp_path / "cache"))
    rows_samples = collect_samples(tracker, collect(tracker, "toy"))
    labels = sorted(s.label for s in rows_samples["toy"])
    assert labels == ["toy-denoise(sample=True) vs toy-noise(sigma=0.05)", "toy-denoise(sample=True) vs toy-noise(sigma=0.2)"]
    (first,) = {s.ids for s in rows_samples["toy"]}
    assert len(first) == 3
    out = write_report(tracker, "toy", tmp_path / "rep", formats=["md", "html"], log_to_parent=False)
    assert "![gallery toy](gallery_toy.png)" in out.markdown
    assert (tmp_path / "rep" / "gallery_toy.png").stat().st_size > 0
    assert "gallery_toy.png" in (tmp_path / "rep" / "report.html").read_text()
    plain = write_report(tracker, "toy", tmp_path / "rep2", formats=["md"], log_to_parent=False, gallery=False)
    assert "gallery" not in plain.markdown



def test_long_row_titles_of_a_gallery_never_run_into_each_other_or_off_the_page():
    """The Table 4 gallery's titles (a cell's label with its settings) once overlapped the next
    row's and were cut at the page's left edge."""
    from vispriv.harness.artifacts import image_grid_figure
    from vispriv.harness.report.gallery import wrap_title

    ldp = ("ldp-feat(audit_trials=0,dictionary_size=262144,dictionary_source=jittered,"
           "epsilon={eps},utility=False)")
    invert = "invert-ldp(defense.dictionary_source=jittered,network.steps=1200{refine})"
    labels = ["truth"] + [
        wrap_title(f"{invert.format(refine=r)} vs {ldp.format(eps=e)} (SSIM .43 on these)")
        for e in (10, 16) for r in ("", ",refine.steps=100")
    ] + [wrap_title("flat-grey vs " + ldp.format(eps=16) + " (+3 identical) (SSIM 0.35 on these)")]
    images = np.zeros((4, 16, 16))
    fig = image_grid_figure([images] * len(labels), labels, ["a", "b", "c", "d"], max_cols=4)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    page = fig.bbox
    boxes = [ax.yaxis.label.get_window_extent(renderer) for ax in fig.axes[::4]]
    for i, (box, ax) in enumerate(zip(boxes, fig.axes[::4])):
        assert box.x0 >= page.x0 and box.y0 >= page.y0 and box.y1 <= page.y1, f"row {i} title leaves the page"
        assert box.x1 <= ax.get_window_extent(renderer).x0, f"row {i} title runs into its images"
        for j, other in enumerate(boxes[i + 1:], start=i + 1):
            assert not box.overlaps(other), f"titles of rows {i} and {j} overlap"


def _colour_pair(n: int = 1, side: int = 16) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    truth = rng.random((n, side, side, 3))
    estimate = np.clip(truth + rng.normal(0, 0.2, truth.shape) + [0.1, -0.2, 0.0], 0.0, 1.0)  # off in colour too
    return truth, estimate


def test_the_gallery_quotes_the_tables_ssim_for_the_same_images(tmp_path):
    """One image read 0.67 in the gallery (grey, 8-bit) and 0.606 in the table (colour)."""
    from vispriv.plugins.metrics.image_quality import SSIM

    truth, estimate = (Images(x, ["a"]) for x in _colour_pair())  # the payloads the metrics receive
    table = SSIM().score(truth, estimate, CellContext())["ssim"]
    path = save_reconstruction_sample(tmp_path / "s.npz", ["a"], truth.images, estimate.images)
    with np.load(path) as data:
        sample = Sample("dlg vs none", ("a",), data["truth"], data["estimate"], data["ssim"])
    assert sample.mean_ssim() == table
    assert sample.ssim_text() == f"SSIM {table:.3f} on these"
    older = Sample("written without the SSIM", ("a",), sample.truth, sample.estimate)  # only the 8-bit copies
    assert older.ssim_text() == f"SSIM {older.mean_ssim():.3f} on these, 8-bit" and older.mean_ssim() != table


def test_a_one_column_gallery_keeps_its_row_titles_on_the_page(tmp_path):
    """A gallery of one image clipped its row titles at the page's left edge."""
    from vispriv.harness.artifacts import image_grid_figure
    from vispriv.harness.report.gallery import wrap_title

    labels = ["truth", wrap_title("inverting-gradients(steps=2000) vs none (SSIM 0.606 on these)")]
    fig = image_grid_figure([np.zeros((1, 16, 16, 3))] * 2, labels, ["a"], max_cols=1)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        box = ax.yaxis.label.get_window_extent(renderer)
        assert box.x0 >= fig.bbox.x0 and box.x1 <= ax.get_window_extent(renderer).x0, ax.yaxis.label.get_text()
