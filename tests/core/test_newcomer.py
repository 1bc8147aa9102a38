"""A newcomer's first hour: own photos, honest frontiers and colours, quiet logs, no internal references."""

from __future__ import annotations

import ast
import gc
import json
import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from vispriv.harness.cli import cli
from vispriv.harness.report import CellRow, Pivot, config_labels, heatmap_figure, pivot
from vispriv.harness.report import to_markdown as table_markdown
from vispriv.harness.report.frontier import frontiers
from vispriv.harness.report.frontier import to_markdown as frontier_markdown
from vispriv.harness.report.paired import Ladder, Step
from vispriv.harness.report.paired import to_markdown as ladder_markdown
from vispriv.harness.tracking import Tracker

ROOT = Path(__file__).resolve().parents[2]
ONLY_IMAGE_RELEASE = {"VISPRIV_PLUGINS": "metrics,image-release"}


def _photos(folder: Path, names=("astronaut", "coffee", "chelsea"), side: int = 24) -> Path:
    """A user's folder of a few real PNG photos (scikit-image's), made small."""
    import skimage.data
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        img = getattr(skimage.data, name)()
        step = max(1, min(img.shape[:2]) // side)
        Image.fromarray(np.ascontiguousarray(img[::step, ::step])).save(folder / f"{name}.png")
    return folder


def _config(write_config, tmp_path, datasets, defenses, attacks=("as-released",), name="mine", metrics=("ssim",)):
    return write_config({"name": name, "datasets": datasets, "defenses": list(defenses), "attacks": list(attacks),
                         "metrics": list(metrics), "cache_dir": str(tmp_path / "cache")})


# -- item 1: own photos in image-release; a matrix that plans no cell ---------------------------
def test_own_image_folder_runs_in_image_release(run_cli, write_config, tmp_path):
    photos = _photos(tmp_path / "photos")
    cfg = _config(write_config, tmp_path, [{"name": "image-folder", "root": str(photos), "size": 16}],
                  ["none", {"name": "pixelate", "block": 4}])
    ran = run_cli("matrix", str(cfg), "--quiet", env=ONLY_IMAGE_RELEASE)
    assert ran.returncode == 0, ran.stderr
    assert "2 cells finished, 0 failed" in ran.stdout
    report = run_cli("report", "--experiment", "mine", "--metric", "ssim", "--no-log", env=ONLY_IMAGE_RELEASE)
    assert report.returncode == 0, report.stderr
    assert "image-release" in report.stdout and "pixelate" in report.stdout


def test_image_folder_resolves_to_the_scenario_of_the_defenses(toy_registry, tmp_path):
    from vispriv.harness.config import validate_config
    from vispriv.harness.matrix import build_matrix

    photos = _photos(tmp_path / "photos", names=("astronaut",))
    both = {"name": "x", "datasets": [{"name": "image-folder", "root": str(photos)}]}
    image = build_matrix(validate_config({**both, "defenses": ["pixelate"], "attacks": ["as-released"]}), toy_registry)
    assert [c.scenario for c in image.cells] == ["image-release"]
    descriptor = build_matrix(validate_config({**both, "defenses": ["affine-lifting"], "attacks": ["database"]}),
                              toy_registry)
    assert {c.scenario for c in descriptor.cells} == {"descriptor-release"}


def test_a_matrix_that_plans_no_cell_is_exit_2_before_any_run(run_cli, write_config, tmp_path):
    # The toy dataset with image-release's defense: every pair skipped, for a reason each.
    cfg = _config(write_config, tmp_path, [{"name": "toy-images", "n": 2}], ["pixelate"], ["as-released"])
    db = tmp_path / "store.db"
    ran = run_cli("matrix", str(cfg), "--tracking-uri", f"sqlite:///{db}")
    assert ran.returncode == 2, ran.stdout + ran.stderr
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the config plans no cell")
    assert "belongs to scenario image-release" in lines[0]
    assert "Traceback" not in ran.stderr and "parent run" not in ran.stdout
    if db.exists():  # the store may exist (it was checked), but holds no run of this experiment
        tracker = Tracker(f"sqlite:///{db}")
        exp = tracker.experiment_id("mine", create=False)
        assert exp is None or not tracker.client.search_runs([exp])
    dry = run_cli("matrix", str(cfg), "--dry-run")
    assert dry.returncode == 2 and "plans no cell" in dry.stderr


# -- item 2: the baseline on every frontier; the scaffold's defense logs a utility ---------------
def _row(defense: str, name: str, metrics: dict, params: dict | None = None, attack: str = "as-released",
         hib: dict | None = None) -> CellRow:
    return CellRow(run_id=f"{attack}|{defense}", scenario="image-release", dataset="d", defense=defense, attack=attack,
                   params={"defense": name, "attack": attack, **(params or {})}, metrics=metrics,
                   higher_is_better=hib or {"images/ssim": True, "utility/cost": False, "utility/acc": True},
                   artifact_uri="")


def test_frontier_keeps_the_baseline_and_names_what_it_leaves_out():
    rows = [_row("none", "none", {"images/ssim": 1.0}),
            _row("blur(sigma=1)", "blur", {"images/ssim": 0.5, "utility/cost": 0.1, "utility/acc": 0.7},
                 {"defense.sigma": "1.0"}),
            _row("blur(sigma=2)", "blur", {"images/ssim": 0.3, "utility/cost": 0.2, "utility/acc": 0.5},
                 {"defense.sigma": "2.0"})]
    (cost,) = frontiers(rows, "utility/cost", "images/ssim")
    baseline = next(p for p in cost.points if p.defense == "none")
    assert baseline.utility == 0.0 and baseline.on_front and "by definition" in baseline.label
    assert not cost.missing
    (acc,) = frontiers(rows, "utility/acc", "images/ssim")  # higher-is-better: not assumed, named
    assert acc.missing == ["none"]
    assert "Left out (no run with both utility/acc and images/ssim): the defense `none`." in frontier_markdown(acc)
    assert sorted(p.label for p in acc.points) == ["blur(sigma=1)", "blur(sigma=2)"]


def test_image_release_baseline_logs_its_pixel_change(run_cli, write_config, tmp_path):
    cfg = _config(write_config, tmp_path, [{"name": "sample-images", "size": 16, "n_private": 2}],
                  ["none", {"name": "pixelate", "block": 4}])
    assert run_cli("matrix", str(cfg), "--quiet", env=ONLY_IMAGE_RELEASE).returncode == 0
    out = run_cli("report", "--experiment", "mine", "--metric", "ssim", "--frontier", "pixel_change:ssim",
                  "--no-log", env=ONLY_IMAGE_RELEASE)
    assert out.returncode == 0, out.stderr
    assert re.search(r"^\| none \| 0\.000 \| 1\.000 \| as-released \| yes \|$", out.stdout, re.M), out.stdout
    assert "Left out" not in out.stdout


def test_scaffolded_defense_logs_a_utility_and_imports_only_what_it_uses(tmp_path):
    from vispriv.harness.context import CellContext
    from vispriv.harness.scaffold import scaffold
    from vispriv.plugins.image_release.data import SampleImages

    for kind in ("defense", "attack", "metric", "dataset"):
        root = scaffold(f"my-{kind}", kind, tmp_path)
        source = (root / f"vispriv_my_{kind}" / "plugin.py").read_text()
        tree = ast.parse(source)
        imported = {a.asname or a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                    for a in n.names} - {"annotations"}
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        assert imported <= used, (kind, imported - used)
        readme = (root / "README.md").read_text()
        assert "docs/" not in readme and "vispriv docs writing-a-plugin" in readme
    namespace: dict = {}
    exec(compile((tmp_path / "my-defense" / "vispriv_my_defense" / "plugin.py").read_text(), "plugin.py", "exec"),
         namespace)
    ctx = CellContext(seed=0)
    scene = SampleImages(SampleImages.Config(size=16, n_private=2)).load(ctx)
    out = namespace["MyDefense"]().protect(scene.private, scene.public, ctx)
    assert 0.0 < out.utility["pixel_change"] < 0.2 and out.utility_directions == {"pixel_change": False}


# -- item 3: report details ----------------------------------------------------------------------
def test_an_infinite_psnr_is_coloured_as_the_worst_for_privacy():
    p = Pivot("images/psnr", "image-release", ["as-released"], ["none", "pixelate(block=4)", "pixelate(block=8)"],
              higher_is_better=True)
    p.values = {("as-released", "none"): math.inf, ("as-released", "pixelate(block=4)"): 22.0,
                ("as-released", "pixelate(block=8)"): 18.0}
    assert p.colour_position(math.inf) == 0.0  # the red end: the attack copied the image exactly
    fig = heatmap_figure(p)
    shown = fig.axes[0].images[0].get_array()
    import matplotlib.pyplot as plt

    plt.close(fig)
    assert shown[0, 0] == 0.0 and not np.ma.is_masked(shown[0, 0])  # drawn red, not left white
    assert shown[0, 2] == 1.0  # the lowest PSNR is the green end


def test_paired_header_speaks_of_privacy():
    ladder = Ladder("images/ssim", "image-release", "d", True, [Step("as-released vs none", 1.0, 4)])
    head = ladder_markdown(ladder).splitlines()[0]
    assert "privacy: higher = attack succeeds" in head and "is better" not in head


def test_one_label_format_across_tables_frontier_and_heatmap():
    rows = [_row(f"my-blur(sigma={s})", "my-blur", {"images/ssim": 0.5 / s, "utility/cost": 0.1 * s},
                 {"defense.sigma": f"{float(s)}"}) for s in (1, 2)]
    labels = config_labels(rows, "defense")
    assert labels == {"my-blur(sigma=1)": "my-blur(sigma=1)", "my-blur(sigma=2)": "my-blur(sigma=2)"}
    (p,) = pivot(rows, "images/ssim")
    assert "| attack \\ defense | my-blur(sigma=1) | my-blur(sigma=2) |" in table_markdown(p)
    (f,) = frontiers(rows, "utility/cost", "images/ssim")
    assert {q.label for q in f.points} == {"my-blur(sigma=1)", "my-blur(sigma=2)"}
    fig = heatmap_figure(p)
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    import matplotlib.pyplot as plt

    plt.close(fig)
    assert ticks == ["my-blur(sigma=1)", "my-blur(sigma=2)"]


def test_heatmap_width_follows_the_column_count():
    from vispriv.harness.report import heatmap_size

    def pivot_of(n: int) -> Pivot:
        cols = [f"d{i}" for i in range(n)]
        return Pivot("images/ssim", "s", ["a"], cols, {("a", c): 0.1 * i for i, c in enumerate(cols)})

    w5, w9 = heatmap_size(pivot_of(5))[0], heatmap_size(pivot_of(9))[0]
    assert w9 - w5 == pytest.approx(4 * 1.1)  # 1.1 inch per column
    from vispriv.harness.report import html as report_html

    page = report_html.page("x", "", "sqlite:///x", [], [report_html.Section("s", tables=[(pivot_of(7), "h.png")])], [], [])
    px = int(re.search(r'alt="heatmap of images/ssim" style="max-width:min\(100%,(\d+)px\)"', page).group(1))
    assert px >= 7 * 110 > 520  # shown at its own size, not shrunk into 520 px


# -- item 4: no bar redraws in a log ---------------------------------------------------------------
def test_progress_is_one_line_per_cell_when_stderr_is_not_a_terminal(run_cli, write_config, tmp_path):
    cfg = _config(write_config, tmp_path, [{"name": "sample-images", "size": 16, "n_private": 2}],
                  ["none", {"name": "pixelate", "block": [2, 4]}])
    ran = run_cli("matrix", str(cfg), env=ONLY_IMAGE_RELEASE)  # no --quiet; stderr is a pipe
    assert ran.returncode == 0, ran.stderr
    assert "\r" not in ran.stderr and "\x1b[" not in ran.stderr
    progress = [line for line in ran.stderr.splitlines() if line.startswith("cells ")]
    assert [line.split(" (")[0] for line in progress] == ["cells 1/3", "cells 2/3", "cells 3/3"]


# -- item 5: one warning line; no standard error of one sample -------------------------------------
def test_corrupt_photo_is_one_warning_line_and_one_image_has_no_standard_error(run_cli, write_config, tmp_path):
    photos = _photos(tmp_path / "photos", names=("astronaut",))
    (photos / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    (photos / "empty.jpg").write_bytes(b"")
    cfg = _config(write_config, tmp_path, [{"name": "image-folder", "root": str(photos), "size": 16}], ["none"],
                  metrics=("ssim", "psnr"))
    ran = run_cli("matrix", str(cfg), "--quiet", env=ONLY_IMAGE_RELEASE)
    assert ran.returncode == 0, ran.stderr
    warned = [line for line in ran.stderr.splitlines() if "unreadable" in line]
    assert len(warned) == 1 and warned[0].startswith("warning: skipped 2 unreadable image file(s)")
    assert "broken.png (not a JPEG/PNG image)" in warned[0] and "empty.jpg (empty file)" in warned[0]
    assert "UserWarning" not in ran.stderr and "warnings.warn" not in ran.stderr and "_memo" not in ran.stderr
    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = tracker.cell_runs(tracker.experiment_id("mine", create=False), status="FINISHED")
    assert math.isnan(run.data.metrics["images/ssim_se"])
    report = run_cli("report", "--experiment", "mine", "--metric", "ssim", "--no-log", env=ONLY_IMAGE_RELEASE)
    assert "(n = 1)" in report.stdout and "± 0.000" not in report.stdout


def test_zero_byte_and_unreadable_files_are_counted_and_named(tmp_path):
    from vispriv.harness.data.image_folder import load_image_folder

    photos = _photos(tmp_path / "photos", names=("astronaut", "coffee"))
    (photos / "sub").mkdir()
    (photos / "sub" / "zero.png").write_bytes(b"")
    (photos / "notes.jpg").write_text("not an image")
    good = (photos / "astronaut.png").read_bytes()
    (photos / "cut.png").write_bytes(good[: len(good) // 3])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        images = load_image_folder(photos, 16)
    assert list(images.ids) == ["astronaut.png", "coffee.png"]
    (message,) = [str(w.message) for w in caught]
    assert message.startswith("skipped 3 unreadable image file(s)")
    assert "sub/zero.png (empty file)" in message and "notes.jpg (not a JPEG/PNG image)" in message
    assert "cut.png (" in message


# -- item 6: no internal references in user-facing text ------------------------------------------
INTERNAL = re.compile(r"shared/papers|/work/|ldp-feat\.md|dphe\.md|geolocation-album-pruning\.md|reference-notes"
                      r"|\b[Ii]ssues? #?\d+")


def _example_headers() -> dict[str, str]:
    out = {}
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        out[path.name] = "\n".join(line for line in path.read_text().splitlines() if "#" in line)
    return out


def test_no_internal_paths_or_issue_numbers_in_user_facing_text():
    from vispriv.harness.plugin import plugin_info
    from vispriv.harness.registry import load_registry
    from vispriv.harness.schema import config_schema

    texts = {p.name: p.read_text() for p in (ROOT / "docs").glob("*.md")}
    texts["README.md"] = (ROOT / "README.md").read_text()
    texts.update(_example_headers())
    # Module docstrings ship in the wheel and show in help(): the package's and the benchmarks' sources too.
    for folder in ("harness", "plugins", "src", "benchmarks"):
        texts.update({str(p.relative_to(ROOT)): p.read_text() for p in (ROOT / folder).rglob("*.py")})
    registry = load_registry()
    for cls in registry.all():
        texts[f"{cls.kind} {cls.name}"] = json.dumps({**plugin_info(cls), "config": config_schema(cls.Config)})
    texts["cli help"] = "\n".join(CliRunner().invoke(cli, [*cmd, "--help"]).output
                                  for cmd in ([], ["matrix"], ["report"], ["plugins"], ["new-plugin"], ["docs"]))
    found = {name: INTERNAL.findall(text) for name, text in texts.items()}
    assert not {k: v for k, v in found.items() if v}


def test_writing_a_plugin_install_line_expands_the_home_folder():
    guide = (ROOT / "docs" / "writing-a-plugin.md").read_text()
    assert not re.search(r"""['"]~""", guide)
    assert 'pip install -e "$HOME/src/gauss-noise[test]"' in guide
    shipped = CliRunner().invoke(cli, ["docs", "writing-a-plugin"])
    assert shipped.exit_code == 0 and shipped.output == guide


# -- item 7: small CLI truths ----------------------------------------------------------------------
def test_ui_says_when_the_store_does_not_exist(tmp_path):
    missing = tmp_path / "nothing.db"
    out = CliRunner().invoke(cli, ["ui", "--tracking-uri", f"sqlite:///{missing}"])
    assert out.exit_code == 0 and f"warning: no store at {missing} yet" in out.output
    assert not missing.exists()
    (tmp_path / "there.db").write_bytes(b"")
    assert "no store" not in CliRunner().invoke(cli, ["ui", "--tracking-uri", f"sqlite:///{tmp_path / 'there.db'}"]).output


def test_plugins_of_one_kind_show_where_each_comes_from(monkeypatch):
    monkeypatch.setenv("VISPRIV_PLUGINS", "metrics,image-release")
    out = CliRunner().invoke(cli, ["plugins", "--kind", "defense"])
    assert out.exit_code == 0, out.output
    header, *rows = out.output.splitlines()
    assert header.split()[:5] == ["KIND", "NAME", "SCENARIO", "VERSION", "FROM"]
    assert any(re.match(r"defense\s+pixelate\s+image-release\s+1\.0\s+vispriv\s+Publishes", r) for r in rows)


def test_runs_log_the_package_version_and_the_checkout_commit(tracker):
    from importlib.metadata import version

    exp = tracker.experiment_id("v")
    parent = tracker.start_parent(exp, "p", {}, {})
    child = tracker.start_child(exp, parent, "c", {})
    for run_id in (parent, child):
        tags = tracker.client.get_run(run_id).data.tags
        assert tags["vispriv.version"] == version("vispriv")
        assert re.fullmatch(r"[0-9a-f]{40}", tags["vispriv.git_sha"])  # tests run from a checkout


def test_readme_installs_what_exists_today():
    readme = (ROOT / "README.md").read_text()
    install = readme.split("## Install", 1)[1].split("\n## ", 1)[0]
    commands = [line.split("#")[0].strip() for line in install.splitlines()]
    assert "pip install vispriv" not in commands
    assert "pip install ." in commands and "python -m build" in install


def test_federated_image_folder_names_an_empty_file_too(tmp_path):
    from vispriv.harness.context import CellContext
    from vispriv.plugins.federated.datasets import FederatedImages

    for cls in ("cat", "dog"):
        _photos(tmp_path / "imgs" / cls, names=("astronaut", "coffee", "chelsea", "camera"), side=12)
    (tmp_path / "imgs" / "dog" / "empty.png").write_bytes(b"")
    plugin = FederatedImages(FederatedImages.Config(source="image-folder", root=str(tmp_path / "imgs"), size=8, n_users=2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plugin.load(CellContext(seed=0))
        gc.collect()  # a decoder that opened the empty file and failed leaves it open: a ResourceWarning here
    (message,) = [str(w.message) for w in caught if "unreadable" in str(w.message)]
    assert message.startswith("skipped 1 unreadable") and "dog/empty.png (empty file)" in message
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


def test_a_heatmap_of_few_columns_with_long_labels_keeps_its_layout():
    # Three long defense labels over one attack collapsed the axes to nothing (matplotlib's
    # "constrained_layout not applied" warning, printed in the middle of `vispriv report`).
    import warnings

    import matplotlib.pyplot as plt

    cols = [f"ldp-feat(audit_trials=200,dictionary_size=64,epsilon={e},matching.ransac_max_iter=50,matching.stereo=False)"
            for e in (4, 8, 16)]
    p = Pivot("utility/hpatches_n_matches", "descriptor-release", ["mean-image"], cols,
              {("mean-image", c): float(i) for i, c in enumerate(cols)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = heatmap_figure(p)
        fig.canvas.draw()
    box = fig.axes[0].get_position()
    plt.close(fig)
    assert box.width > 0.1 and box.height > 0.1
