"""The HTML report renders in headless Chromium (Debian's ``chromium``) to a page that is not blank."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from scale_helpers import new_tracker, run_toy, toy_config

from vispriv.harness.report import write_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _chromium() -> str:
    if CHROMIUM:
        return CHROMIUM
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail("CI is set but chromium is missing (.ci/run installs Debian's chromium package)")
    pytest.skip("chromium is not installed (apt-get install chromium); CI installs it and runs this test")


@pytest.fixture
def report_dir(tmp_path) -> Path:
    tracker = new_tracker(tmp_path / "store")
    config = toy_config(attacks=[{"name": "toy-denoise", "grid": True}, {"name": "toy-denoise", "fail": True}])
    result = run_toy(config, tracker, tmp_path / "cache")
    assert len(result.finished) == 2 and len(result.failed) == 2
    out = tmp_path / "report"
    write_report(tracker, "toy-scale", out, ["ssim", "distortion"], ["md", "html"],
                 curves=[("defense.sigma", "ssim", [])], command="test", log_to_parent=False)
    return out


def test_report_html_has_tables_heatmaps_grids_curves_and_failures(report_dir):
    text = (report_dir / "report.html").read_text()
    assert "<table>" in text and "background:hsl(" in text
    assert 'src="heatmap_toy__images_ssim.png"' in text
    grids = sorted((report_dir / "grids").rglob("*.png"))
    assert len(grids) == 2  # one reconstruction grid per finished cell, copied next to the report
    for g in grids:
        assert f'src="{g.relative_to(report_dir)}"' in text
    assert "Privacy-utility curves" in text and "curve_images_ssim_vs_defense.sigma.png" in text
    assert "Failed cells" in text and "toy attack failed on purpose" in text


def test_report_renders_in_headless_chromium(report_dir, tmp_path):
    from skimage.io import imread

    browser = _chromium()
    shot = tmp_path / "shot.png"
    cmd = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
        "--window-size=1200,900", (report_dir / "report.html").resolve().as_uri(),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, start_new_session=True)
    assert shot.exists(), f"chromium wrote no screenshot (rc {proc.returncode}): {proc.stderr[-2000:]}"
    pixels = imread(shot)[..., :3].astype(np.float64)
    assert pixels.shape[:2] == (900, 1200)
    assert pixels.std() > 20  # a blank (or all-white) page has ~zero variance
    header = pixels[:40].reshape(-1, 3).mean(axis=0)
    assert header[2] > header[0] + 30  # the dark blue header rendered (the CSS loaded)
    coloured = np.abs(pixels[..., 0] - pixels[..., 1]) > 25
    assert coloured.mean() > 0.01  # coloured table cells / heatmaps, not just text
