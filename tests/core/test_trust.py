"""Issue 13: every failure visible, no run left dangling (real processes, real sqlite store)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from core_helpers import SITE_OK, toy_config
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from pydantic import Field

from vispriv.harness import Dataset, Images, PluginConfig, Scene
from vispriv.harness.matrix import Stage


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.strip().splitlines() if not line.startswith("warning: plugin")]


def _parents(db: Path) -> list[str]:
    """Statuses of the matrix (parent) runs in a sqlite store."""
    if not db.exists():
        return []
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "select r.status from runs r join tags t on r.run_uuid = t.run_uuid "
            "where t.key = 'vispriv.kind' and t.value = 'matrix'"
        ).fetchall()
    return sorted(r[0] for r in rows)


def _save_png(path: Path, seed: int, shape=(40, 48, 3)) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray((np.random.default_rng(seed).uniform(size=shape) * 255).astype(np.uint8)).save(path)


# -- item 2: exit status ----------------------------------------------------------------
def test_matrix_exits_1_when_a_cell_failed(run_cli, write_config):
    cfg = write_config(toy_config(attacks=[{"name": "toy-denoise", "fail": [True, False]}]))
    out = run_cli("matrix", str(cfg), "--quiet")
    assert out.returncode == 1, out.stderr
    assert "2 cells finished, 2 failed" in out.stdout
    assert out.stderr.count("FAILED") == 2 and "toy attack failed on purpose" in out.stderr
    ok = run_cli("matrix", str(write_config(toy_config(), "ok.yaml")), "--quiet")
    assert ok.returncode == 0, ok.stderr


def test_unwritable_cache_dir_is_one_error_before_any_run(run_cli, write_config, tmp_path):
    not_a_dir = tmp_path / "cache-file"
    not_a_dir.write_text("a file where the cache folder should be")
    out = run_cli("matrix", str(write_config(toy_config())), "--quiet", "--cache-dir", str(not_a_dir))
    assert out.returncode == 2, out.stderr
    lines = _error_lines(out.stderr)
    assert len(lines) == 1 and "cache dir" in lines[0] and str(not_a_dir) in lines[0], out.stderr
    assert _parents(tmp_path / "mlflow.db") == []


# -- item 3: no run left RUNNING, no scratch left behind ---------------------------------
def test_unknown_executor_leaves_no_run_and_no_scratch(run_cli, write_config, tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = run_cli("matrix", str(write_config(toy_config())), "--quiet", "--executor", "nope",
                  env={"TMPDIR": str(scratch)})
    assert out.returncode == 2, out.stderr
    # --executor is a choice: click's usage error, one "Error:" line naming what is allowed.
    errors = [line for line in _error_lines(out.stderr) if line.startswith("Error")]
    assert errors == ["Error: Invalid value for '--executor': 'nope' is not one of 'local', 'ray'."]
    assert "RUNNING" not in _parents(tmp_path / "mlflow.db")
    assert list(scratch.iterdir()) == []


def test_crash_inside_the_matrix_ends_the_parent_failed(toy_registry, tmp_path, monkeypatch):
    from vispriv.harness import executors
    from vispriv.harness.config import validate_config
    from vispriv.harness.execute import clear_memo
    from vispriv.harness.matrix import build_matrix
    from vispriv.harness.runner import run_matrix
    from vispriv.harness.tracking import Tracker

    clear_memo()
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)

    def crash(*args, **kwargs):
        raise RuntimeError("executor bug")

    monkeypatch.setattr(executors, "run_cell", crash)
    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    cfg = validate_config(toy_config())
    with pytest.raises(RuntimeError, match="executor bug"):
        run_matrix(cfg, build_matrix(cfg, toy_registry), tracker, quiet=True, cache_dir=str(tmp_path / "cache"))
    assert _parents(tmp_path / "mlflow.db") == ["FAILED"]
    assert not list(tmp_path.glob("vispriv-artifacts-*"))


def test_sigkill_then_resume_marks_stale_runs_killed_and_cleans_scratch(tmp_path, write_config):
    cfg = write_config(toy_config(attacks=[{"name": "toy-denoise", "delay": 30}]))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    started = tmp_path / "started.txt"
    env = {**os.environ, "PYTHONPATH": str(SITE_OK), "VISPRIV_PLUGINS": "toy,metrics", "TMPDIR": str(scratch),
           "VISPRIV_TOY_STARTED": str(started)}
    cmd = [sys.executable, "-m", "vispriv", "matrix", str(cfg), "--quiet"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not started.exists():
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert _parents(tmp_path / "mlflow.db") == ["RUNNING"]
    assert list(scratch.glob("vispriv-artifacts-*"))
    env["VISPRIV_TOY_STARTED"] = ""
    again = subprocess.run([*cmd, "--resume", "--set", "attacks.0.delay=0"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "marked 1 stale run(s) KILLED" in again.stderr
    assert _parents(tmp_path / "mlflow.db") == ["FINISHED", "KILLED"]
    assert list(scratch.iterdir()) == []


# -- item 1: required plugin config fields, image folders ----------------------------------
class _NeedsRoot(Dataset):
    class Config(PluginConfig):
        root: str
        size: int = Field(8, ge=1)

    name = "needs-root"
    version = "1.0"
    scenario = "toy"
    produces = (Images,)

    def load(self, ctx):  # pragma: no cover -- only labels are built here
        return Scene(private=Images(np.zeros((1, 2, 2, 1))), public=None)


def test_stage_of_a_plugin_with_a_required_field_has_a_label():
    stage = Stage(_NeedsRoot, _NeedsRoot.Config(root="/data"), ("root",))
    assert stage.overrides() == {"root": "/data"}
    assert stage.label() == "needs-root(root=/data)"
    sized = Stage(_NeedsRoot, _NeedsRoot.Config(root="/d", size=4), ("root", "size"))
    assert sized.label() == "needs-root(root=/d,size=4)"


def test_image_folder_dry_run_and_missing_root(run_cli, write_config, tmp_path):
    for i in range(3):
        _save_png(tmp_path / "imgs" / f"{i}.png", i)
    base = {"name": "folder", "defenses": ["affine-lifting"], "attacks": ["database"]}
    env = {"VISPRIV_PLUGINS": "descriptor-release,metrics"}
    cfg = write_config({**base, "datasets": [{"name": "image-folder", "root": str(tmp_path / "imgs"), "size": 32}]})
    dry = run_cli("matrix", str(cfg), "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert "image-folder(root=" in dry.stdout and "Traceback" not in dry.stderr
    missing = write_config({**base, "datasets": [{"name": "image-folder", "root": str(tmp_path / "nope")}]}, "m.yaml")
    for args in (["--dry-run"], ["--quiet"]):
        out = run_cli("matrix", str(missing), *args, env=env)
        assert out.returncode == 2, out.stderr
        lines = _error_lines(out.stderr)
        assert len(lines) == 1 and "does not exist" in lines[0] and str(tmp_path / "nope") in lines[0], out.stderr
    assert _parents(tmp_path / "mlflow.db") == []


def test_federated_image_folder_skips_corrupt_files_with_a_warning(tmp_path):
    from vispriv.harness.context import CellContext
    from vispriv.harness.errors import InputError
    from vispriv.plugins.federated.datasets import FederatedImages

    for cls in ("cat", "dog"):
        for i in range(4):
            _save_png(tmp_path / "imgs" / cls / f"{i}.png", i, (12, 12))
    (tmp_path / "imgs" / "dog" / "broken.png").write_bytes(b"not an image")
    plugin = FederatedImages(FederatedImages.Config(source="image-folder", root=str(tmp_path / "imgs"), size=8, n_users=2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scene = plugin.load(CellContext(seed=0))
    assert scene.private.class_names == ["cat", "dog"]
    assert any("broken.png" in str(w.message) for w in caught)
    for cls in ("cat", "dog"):
        for p in (tmp_path / "imgs" / cls).iterdir():
            p.write_bytes(b"garbage")
    with pytest.warns(UserWarning, match="skipped 9 unreadable"), pytest.raises(InputError, match="no readable"):
        plugin.load(CellContext(seed=0))


# -- item 5: plugin isolation --------------------------------------------------------------
def _distribution(site: Path, dist: str, module: str, source: str) -> Path:
    """A real installed distribution (module + dist-info with a ``vispriv`` entry point) under ``site``."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(source)
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[vispriv]\n{module} = {module}\n")
    return site


_HEADER = "from vispriv.harness import Defense, Images, PluginConfig, hookimpl\n"


def test_hook_with_a_misnamed_argument_is_one_warning(monkeypatch, tmp_path):
    from vispriv.harness.errors import PluginError
    from vispriv.harness.registry import load_registry

    site = _distribution(tmp_path, "bad-args", "vispriv_badargs",
                         _HEADER + "@hookimpl\ndef vispriv_register_defenses(reg):\n    pass\n")
    monkeypatch.syspath_prepend(str(site))
    registry = load_registry(only=["vispriv_badargs", "metrics"])
    lines = [f.line() for f in registry.failures]
    assert len(lines) == 1 and "vispriv_badargs (bad-args)" in lines[0] and "'reg'" in lines[0], lines
    assert "\n" not in lines[0] and "ssim" in registry.names("metric")
    with pytest.raises(PluginError) as info:
        load_registry(strict=True, only=["vispriv_badargs"])
    assert "skipped" not in str(info.value) and "--strict" in str(info.value)


def test_misspelt_hook_name_is_reported_and_unmarked_hooks_run(monkeypatch, tmp_path):
    from vispriv.harness.registry import load_registry

    body = (
        "class Mine(Defense):\n    name = 'mine'\n    scenario = 'toy'\n    consumes = (Images,)\n    produces = (Images,)\n"
        "def vispriv_register_defenses(register):\n    register(Mine)\n"
        "def vispriv_register_defence(register):\n    register(Mine)\n"
    )
    site = _distribution(tmp_path, "spelling", "vispriv_spelling", _HEADER + body)
    monkeypatch.syspath_prepend(str(site))
    registry = load_registry(only=["vispriv_spelling"])
    assert [f.source for f in registry.failures] == ["vispriv_spelling (spelling)"]
    assert "vispriv_register_defence" in registry.failures[0].error
    fixed = tmp_path / "fixed"
    _distribution(fixed, "fixed", "vispriv_fixed", _HEADER + body.replace("vispriv_register_defence(", "helper("))
    monkeypatch.syspath_prepend(str(fixed))
    registry = load_registry(only=["vispriv_fixed"])
    assert not registry.failures and registry.get("defense", "mine").name == "mine"


def test_third_party_plugin_reusing_a_builtin_name_is_refused_naming_both(monkeypatch, tmp_path):
    from vispriv.harness.registry import load_registry

    body = (
        "class Fake(Defense):\n    name = 'pixelate'\n    scenario = 'image-release'\n"
        "    consumes = (Images,)\n    produces = (Images,)\n"
        "@hookimpl\ndef vispriv_register_defenses(register):\n    register(Fake)\n"
    )
    # named to sort before every built-in entry point, so load order alone would let it win
    site = _distribution(tmp_path, "aaa-fake", "aaa_fake", _HEADER + body)
    monkeypatch.syspath_prepend(str(site))
    registry = load_registry(only=["aaa_fake", "image-release"])
    builtin = registry.get("defense", "pixelate", "image-release")
    assert builtin.__module__.startswith("vispriv.plugins")
    assert len(registry.failures) == 1
    failure = registry.failures[0]
    assert failure.source == "aaa_fake (aaa-fake)" and "(vispriv)" in failure.error and "aaa-fake" in failure.error


# -- items 6-8: configurable metrics, visible empty cells, payload checks, frozen shared state --
def _extras(toy_registry):
    """In-test plugins on top of the toy scenario: a ranking attack, an attack scoring nothing, an in-place writer."""
    import vispriv_toy

    from vispriv.harness import Attack, AttackResult, Labels, Rankings

    class RankAttack(Attack):
        """Ranks class 0 (every item's true class) second of three."""

        name, version, scenario = "toy-rank", "1.0", "toy"
        consumes, produces = (vispriv_toy.NoisyImages,), (Rankings,)

        def attack(self, release, public, ctx):
            scores = np.tile([2.0, 3.0, 1.0], (len(release.ids), 1))
            return AttackResult(estimate={"labels": Rankings(scores, ids=list(release.ids))})

    class Misnamed(Attack):
        name, version, scenario = "toy-misnamed", "1.0", "toy"
        consumes, produces = (vispriv_toy.NoisyImages,), (Images, Labels)

        def attack(self, release, public, ctx):
            return AttackResult(estimate={"pictures": Images(release.images, ids=list(release.ids))})

    class Scribble(Attack):
        name, version, scenario = "toy-scribble", "1.0", "toy"
        consumes, produces = (vispriv_toy.NoisyImages,), (Images,)

        def attack(self, release, public, ctx):
            release.images[:] = 0.0
            return AttackResult(estimate={"images": release})

    class Hooks:
        @staticmethod
        def vispriv_register_attacks(register):
            for cls in (RankAttack, Misnamed, Scribble):
                register(cls)

    toy_registry.add_module(Hooks(), "test-extras")
    assert not [f for f in toy_registry.failures if f.source == "test-extras"]
    return toy_registry


@pytest.fixture
def extras_run(toy_registry, tmp_path):
    from vispriv.harness.config import validate_config
    from vispriv.harness.execute import clear_memo
    from vispriv.harness.matrix import build_matrix
    from vispriv.harness.runner import run_matrix
    from vispriv.harness.tracking import Tracker

    registry = _extras(toy_registry)
    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}")

    def run(**cfg):
        clear_memo()
        config = validate_config(toy_config(defenses=[{"name": "toy-noise"}], **cfg))
        matrix = build_matrix(config, registry)
        return matrix, run_matrix(config, matrix, tracker, quiet=True, cache_dir=str(tmp_path / "cache"))

    run.tracker = tracker
    run.registry = registry
    return run


def test_metric_parameters_are_configured_swept_and_hashed(extras_run):
    from vispriv.harness.config import validate_config
    from vispriv.harness.errors import ConfigError
    from vispriv.harness.matrix import build_matrix

    matrix, result = extras_run(attacks=["toy-rank"], metrics=[{"name": "topk-accuracy", "ks": [[1, 2], [1, 3]]}])
    assert len(matrix.cells) == 2 and len({c.hash for c in matrix.cells}) == 2
    assert not result.failed, [o.error for _, o in result.failed]
    by_ks = {tuple(c.metrics[0].config.ks): {k: v for k, v in o.metrics.items() if k.startswith("labels/")}
             for c, o in result.finished}
    assert by_ks[(1, 2)] == {"labels/top1_accuracy": 0.0, "labels/top2_accuracy": 1.0}
    assert by_ks[(1, 3)] == {"labels/top1_accuracy": 0.0, "labels/top3_accuracy": 1.0}
    params = extras_run.tracker.cell_runs(result.experiment_id)[0].data.params
    assert params["metric.topk-accuracy.ks"] in ("[1, 2]", "[1, 3]")
    # the default ks=(1, 5) needs five classes: the cell fails and says so
    _, default = extras_run(attacks=["toy-rank"], metrics=["topk-accuracy"])
    assert "k=5 needs 1 <= k <= 3" in default.failed[0][1].error
    with pytest.raises(ConfigError, match="metric 'topk-accuracy': unknown key 'k'; allowed: ks"):
        build_matrix(validate_config(toy_config(metrics=[{"name": "topk-accuracy", "k": 3}])), extras_run.registry)


def test_cell_hash_holds_the_seeds_so_resume_never_takes_a_cell_drawn_under_other_seeds(toy_registry, monkeypatch):
    """A change of how seeds derive moves the numbers, so it must move the hash that ``--resume`` matches on;
    metrics at their defaults still enter the hash as name and version only."""
    from vispriv.harness import matrix as matrix_module
    from vispriv.harness.config import validate_config
    from vispriv.harness.hashing import stable_hash
    from vispriv.harness.matrix import build_matrix

    config = validate_config(toy_config(metrics=["ssim", "mae"]))
    cells = build_matrix(config, toy_registry).cells
    for cell in cells:
        metric_keys = sorted([m.name, m.cls.version] for m in cell.metrics)
        assert cell.hash == stable_hash(cell.attack_keys()[-1], metric_keys, cell.matrix_seed, cell.seed)
    before = [c.hash for c in cells]
    real = matrix_module.chain_seeds
    monkeypatch.setattr(matrix_module, "chain_seeds", lambda seed, keys: [s + 1 for s in real(seed, keys)])
    after = [c.hash for c in build_matrix(config, toy_registry).cells]
    assert all(a != b for a, b in zip(before, after))


def test_cell_with_no_privacy_score_is_tagged_with_the_reason(extras_run):
    _, result = extras_run(attacks=["toy-misnamed", "toy-denoise"])
    outcomes = {c.attack_label: o for c, o in result.finished}
    warning = outcomes["toy-misnamed"].warning
    assert "estimate keys ['pictures'] match none of the defense's truth keys ['images', 'labels']" in warning
    assert outcomes["toy-denoise"].warning == ""
    runs = {r.data.tags["vispriv.attack"]: r.data.tags for r in extras_run.tracker.cell_runs(result.experiment_id)}
    assert runs["toy-misnamed"]["vispriv.warning"] == warning and "vispriv.warning" not in runs["toy-denoise"]
    _, no_metric = extras_run(attacks=["toy-denoise"], metrics=["topk-accuracy"])
    assert "no metric of this cell (none) scores images (Images), labels (Labels)" in no_metric.finished[0][1].warning


def test_shared_release_is_read_only_for_attacks(extras_run):
    _, alone = extras_run(attacks=["toy-denoise"])
    _, both = extras_run(attacks=["toy-scribble", "toy-denoise"])
    failed = {c.attack_label: o for c, o in both.failed}
    assert "read-only" in failed["toy-scribble"].error
    assert both.finished[0][1].metrics["images/ssim"] == alone.finished[0][1].metrics["images/ssim"]


def test_device_tag_is_the_device_the_cell_used(extras_run):
    _, result = extras_run(attacks=["toy-denoise"])
    outcome = result.finished[0][1]
    assert outcome.device == "cpu"
    tags = extras_run.tracker.cell_runs(result.experiment_id)[0].data.tags
    assert tags["vispriv.device"] == outcome.device


def test_config_device_reaches_every_cell_context(extras_run, monkeypatch):
    import vispriv.harness.config as config_module

    monkeypatch.setattr(config_module, "check_device", lambda device, source="config": None)  # as on a GPU machine
    _, result = extras_run(attacks=["toy-denoise"], device="cuda:0")
    assert [o.device for _, o in result.finished] == ["cuda:0"]
    tags = extras_run.tracker.cell_runs(result.experiment_id)[0].data.tags
    assert tags["vispriv.device"] == "cuda:0"


@pytest.mark.parametrize(("device", "message"), [
    ("gpu", "device 'gpu' is not one of cpu, cuda, cuda:N"),
    ("cuda", "device 'cuda' asked for, but this torch"),
])
def test_unusable_device_is_one_error_before_any_run(run_cli, write_config, tmp_path, device, message):
    import torch

    if device == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    out = run_cli("matrix", str(write_config(toy_config())), "--quiet", "--set", f"device={device}")
    assert out.returncode == 2, out.stderr
    lines = _error_lines(out.stderr)
    assert len(lines) == 1 and message in lines[0], out.stderr
    assert _parents(tmp_path / "mlflow.db") == []


def test_cpu_tag_names_the_kernels_and_threads_torch_used(extras_run):
    import platform

    import torch

    from vispriv.harness.execute import cpu_used

    _, result = extras_run(attacks=["toy-denoise"])
    tags = extras_run.tracker.cell_runs(result.experiment_id)[0].data.tags
    assert tags["vispriv.cpu"] == result.finished[0][1].cpu == cpu_used()
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert cpu_used() == f"{platform.machine()}; torch {torch.backends.cpu.get_cpu_capability()} kernels, 1 thread"
    finally:
        torch.set_num_threads(before)


def test_payloads_refuse_what_they_document_they_do_not_hold():
    from vispriv.harness import Labels, Rankings
    from vispriv.harness.errors import InputError

    with pytest.raises(InputError, match="Labels must be integers"):
        Labels(np.array([0.0, 1.5]))
    assert Labels(np.array([0.0, 2.0])).labels.tolist() == [0, 2]
    with pytest.raises(InputError, match="Labels: 2 labels but 1 ids"):
        Labels(np.array([0, 1]), ids=["a"])
    with pytest.raises(InputError, match="Rankings: 2 rows but 3 ids"):
        Rankings(np.zeros((2, 4)), ids=["a", "b", "c"])
    with pytest.raises(InputError, match=r"values in \[0, 1\]; got \[0, 2\]"):
        Images(np.array([0.0, 2.0]).reshape(1, 1, 2, 1))


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, st.integers(1, 6), elements=st.floats(-3, 3, allow_nan=False)))
def test_labels_accept_exactly_whole_numbers(values):
    from vispriv.harness import Labels
    from vispriv.harness.errors import InputError

    if np.all(values == np.round(values)):
        assert Labels(values).labels.tolist() == [int(v) for v in values]
    else:
        with pytest.raises(InputError):
            Labels(values)


@settings(max_examples=60, deadline=None)
@given(arrays(np.float32, (2, 3, 3, 1), elements=st.floats(-0.5, 1.5, width=32)))
def test_images_accept_exactly_the_unit_range(values):
    from vispriv.harness.errors import InputError

    if values.min() >= -1e-4 and values.max() <= 1 + 1e-4:
        out = Images(values).images
        assert out.min() >= 0 and out.max() <= 1
    else:
        with pytest.raises(InputError):
            Images(values)


# -- item 4: shared stores (an http:// server: test_http_store.py) ------------------------
@pytest.mark.parametrize("store", ["new", "existing"])
def test_concurrent_resumes_split_the_cells(tmp_path, write_config, store):
    """Two real processes, one sqlite store (new: schema and experiment races), every cell run exactly once."""
    if store == "existing":
        from vispriv.harness.tracking import Tracker

        Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}").experiment_id("toy")
    sigmas = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    cfg = write_config(toy_config(attacks=[{"name": "toy-denoise", "delay": 1.0}],
                                  defenses=[{"name": "toy-noise", "sigma": sigmas}]))
    env = {**os.environ, "PYTHONPATH": str(SITE_OK), "VISPRIV_PLUGINS": "toy,metrics"}
    cmd = [sys.executable, "-m", "vispriv", "matrix", str(cfg), "--quiet", "--resume"]
    procs = [subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for proc, (_out, err) in zip(procs, outs):
        assert proc.returncode == 0, err
        assert "Traceback" not in err, err
    db = tmp_path / "mlflow.db"
    with sqlite3.connect(db) as con:
        hashes = [r[0] for r in con.execute(
            "select t.value from runs r join tags t on r.run_uuid = t.run_uuid "
            "where t.key = 'vispriv.cell_hash' and r.status = 'FINISHED'")]
    assert len(hashes) == len(sigmas) and len(set(hashes)) == len(sigmas)
    assert _parents(db) == ["FINISHED", "FINISHED"]
    ran = [int(out.split(" cells finished")[0].split()[-1]) for out, _ in outs]
    assert sum(ran) == len(sigmas), outs

