"""Mutation probes of the default test tier: apply one small behaviour-changing edit at a time, run the
default-tier test files that cover the edited module, record killed or survived, restore the file.

Run from the repository root on a clean work tree (it restores each file with ``git checkout``):

    .venv/bin/python benchmarks/probes/mutation_probes.py [A|B] > results.tsv

Results of 2026-11-27 are in benchmarks/probes/mutation_probes_2026-11-27.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

DEEP = ["tests/federated_deep/test_inversion_restarts.py", "tests/federated_deep/test_deep_building_blocks.py",
        "tests/federated_deep/test_adaptive_inversion.py"]
DP = ["tests/federated_deep/test_dp_sgd_accounting.py", "tests/federated_deep/test_deep_building_blocks.py",
      "tests/federated_deep/test_utility_only_rounds.py"]
FEATURES = ["tests/federated/test_feature_file_reader.py", "tests/federated/test_feature_inputs.py"]
CAPTURED = ["tests/federated_deep/test_captured_update_names.py", "tests/federated_deep/test_captured_update.py"]
LABELS = ["tests/core/test_labels.py", "tests/core/test_nested_sweeps.py"]
PAIRED = ["tests/core/test_report_boundaries.py", "tests/core/test_report_paired.py"]
REPORT = ["tests/core/test_report_boundaries.py", "tests/core/test_report_views.py", "tests/core/test_report_strongest.py"]
TRACKING = ["tests/core/test_tracking_uris.py", "tests/core/test_runner_tracking.py"]
CLAIMS = ["tests/core/test_claims.py"]
HEARTBEAT = ["tests/core/test_heartbeat.py"]
LOCALISATION = ["tests/localisation/test_localisation_boundaries.py", "tests/localisation/test_localisation_pose.py"]
AUDIT = ["tests/ldp_feat/test_ldp_feat_audit.py"]

#: (area, what, file, old text, new text, test files)
PROBES = [
    ("A", "wrong restart kept (the worst loss)", "plugins/federated/deep/inversion.py",
     "if best is None or run.loss < best.loss:", "if best is None or run.loss > best.loss:", DEEP),
    ("A", "last iterate kept, not the best", "plugins/federated/deep/inversion.py",
     "if math.isfinite(value) and value < best_loss:", "if math.isfinite(value):", DEEP),
    ("A", "Inverting Gradients' box constraint dropped", "plugins/federated/deep/inversion.py",
     "                x.clamp_(0, 1)", "                pass", DEEP),
    ("A", "returned image not clamped to [0, 1]", "plugins/federated/deep/inversion.py",
     "best_x = x.detach().clamp(0, 1).clone()", "best_x = x.detach().clone()", DEEP),
    ("A", "step remainder to the last restarts", "plugins/federated/deep/inversion.py",
     "(1 if r < settings.steps % restarts else 0)", "(1 if r >= restarts - settings.steps % restarts else 0)", DEEP),
    ("A", "DP-SGD epsilon ignores FedAvg local steps", "plugins/defenses/dp_sgd.py",
     "steps = cfg.rounds * (work.steps if work.mode == \"fedavg\" else 1)", "steps = cfg.rounds", DP),
    ("A", "accountant off by one composition", "plugins/defenses/dp_sgd.py",
     "accountant.history = [(sigma, 1.0, compositions)]", "accountant.history = [(sigma, 1.0, compositions + 1)]", DP),
    ("A", "repeated feature ids accepted", "plugins/federated/features/file.py",
     "        if id_ in seen:", "        if False:", FEATURES),
    ("A", "more ids than feature rows accepted", "plugins/federated/features/file.py",
     "    if len(ids) != n:", "    if len(ids) < n:", FEATURES),
    ("A", "fractional float labels accepted", "plugins/federated/features/file.py",
     "np.isfinite(arr) & (arr == np.round(arr))", "np.isfinite(arr)", FEATURES),
    ("A", "extra parameter names in an update accepted", "plugins/federated/deep/captured_files.py",
     "    if missing or extra:", "    if missing:", CAPTURED),
    ("A", "wrapper hint when any (not every) extra name is prefixed", "plugins/federated/deep/captured_files.py",
     "all(str(k).startswith(WRAPPER_PREFIX) for k in extra)", "any(str(k).startswith(WRAPPER_PREFIX) for k in extra)",
     CAPTURED),
    ("A", "captured labels' length unchecked", "plugins/federated/deep/captured_files.py",
     "if truth_labels.shape != (batch_size,):", "if truth_labels.ndim != 1:", CAPTURED),
    ("A", "nested setting reset to the model's default not labelled", "harness/labels.py",
     "reset = {k: _dotted(value, k.removeprefix(key + \".\")) for k in base if k not in mine}", "reset = {}", LABELS),
    ("A", "label counts: tie goes to the last class", "plugins/federated/deep/labels.py",
     "c = int(np.argmax(remaining))", "c = int(len(remaining) - 1 - np.argmax(remaining[::-1]))", DEEP[:1] + DP[:1]),
    ("B", "paired s.e. with ddof=0", "harness/report/paired.py",
     "step.diff_se = float(d.std(ddof=1)", "step.diff_se = float(d.std(ddof=0)", PAIRED),
    ("B", "paired s.e. needs three images (n = 2 boundary)", "harness/report/paired.py",
     "                if len(shared) > 1:", "                if len(shared) > 2:", PAIRED),
    ("B", "tied cells ranked in reverse", "harness/report/paired.py",
     "ranked = sorted(group, key=", "ranked = sorted(group[::-1], key=", PAIRED),
    ("B", "identical frontier points dominate each other", "harness/report/frontier.py",
     "go[0] >= gp[0] and go[1] >= gp[1] and go != gp", "go[0] >= gp[0] and go[1] >= gp[1]", REPORT),
    ("B", "a cell run twice shows its last run", "harness/report/tables.py",
     "return (values[0], None) if len(values) == 1 else mean_se(values)",
     "return (values[-1], None) if len(values) <= 2 else mean_se(values)", REPORT),
    ("B", "https store probed on port 80", "harness/tracking.py",
     "port = parsed.port or (443 if parsed.scheme == \"https\" else 80)", "port = parsed.port or 80", TRACKING),
    ("B", "https store refused as unsupported", "harness/tracking.py",
     "elif uri.startswith((\"http://\", \"https://\")):", "elif uri.startswith(\"http://\"):", TRACKING),
    ("B", "heartbeat not due exactly at the interval", "harness/heartbeat.py",
     "if now - self.last < self.interval:", "if now - self.last <= self.interval:", HEARTBEAT),
    ("B", "claim of another host's process taken over", "harness/claims.py",
     "return host == platform.node() and pid.isdigit()", "return pid.isdigit()", CLAIMS),
    ("B", "lease expires at its boundary", "harness/claims.py",
     "if time.time() - claimed_at > lease:", "if time.time() - claimed_at >= lease:", CLAIMS),
    ("B", "take-over of a dead owner's claim not rechecked", "harness/claims.py",
     "return True, row is not None and row[0] != self.owner", "return True, False", CLAIMS),
    ("B", "localised only strictly inside the position threshold", "plugins/descriptor_release/localisation/utility.py",
     "ok = (position[has_truth] <= metres)", "ok = (position[has_truth] < metres)", LOCALISATION),
    ("B", "inlier floor exclusive", "plugins/descriptor_release/localisation/utility.py",
     "if n_inliers < protocol.min_inliers:", "if n_inliers <= protocol.min_inliers:", LOCALISATION),
    ("B", "epsilon lower bound may go negative", "plugins/descriptor_release/privacy_audit.py",
     "eps_lb = max(0.0, float(np.log(lo1) - np.log(hi2)))", "eps_lb = float(np.log(lo1) - np.log(hi2))", AUDIT),
    ("B", "a claim exactly at the bound is a violation", "plugins/descriptor_release/privacy_audit.py",
     "violated = claimed_epsilon is not None and eps_lb > claimed_epsilon",
     "violated = claimed_epsilon is not None and eps_lb >= claimed_epsilon", AUDIT),
]


def line_of(path: Path, text: str) -> int:
    return path.read_text()[: path.read_text().index(text)].count("\n") + 1


def run(area: str) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    print("area\tmutation\tfile:line\tresult\tkilling test")
    for probe_area, what, file, old, new, tests in PROBES:
        if probe_area != area:
            continue
        path = ROOT / file
        text = path.read_text()
        assert text.count(old) == 1, (file, old)
        where = f"{file}:{line_of(path, old)}"
        path.write_text(text.replace(old, new))
        try:
            done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not slow",
                                   *tests], check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
        finally:
            subprocess.run(["git", "checkout", "--", file], cwd=ROOT, check=True)
        failed = [ln.split(" ", 1)[1].split(" - ")[0] for ln in done.stdout.splitlines() if ln.startswith("FAILED ")]
        result = "killed" if done.returncode != 0 else "survived"
        print(f"{area}\t{what}\t{where}\t{result}\t{failed[0] if failed else ''}", flush=True)


if __name__ == "__main__":
    run(sys.argv[1] if len(sys.argv) > 1 else "A")
