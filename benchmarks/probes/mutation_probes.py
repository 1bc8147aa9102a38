"""Mutation probes of the default test tier: apply one small behaviour-changing edit at a time, run the
default-tier test files that cover the edited module, record killed or survived, restore the file.

Run from the repository root on a clean work tree (it restores each file with ``git checkout``):

    .venv/bin/python benchmarks/probes/mutation_probes.py [A|B|C|D] [SUBSTRING] > results.tsv

SUBSTRING (optional) runs only the probes of the area whose description contains it.

Areas A (deep-gradient attacks and defenses, feature readers, labels, captured-update checks) and
B (the harness: paired differences, frontier, report tables, tracking, heartbeat, claims; the
localisation utility; the epsilon audit) were written by the session that wrote their tests.
Areas C (the same modules as A) and D (the same as B) are fresh probes: other lines, other
mechanisms, written from the product code before any test was read.
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
# Areas C and D (the files a maintainer names for each module: grep of tests/ for its import).
INVERSION = [*DEEP, "tests/federated_deep/test_batched_inversion.py"]
DEEP_LABELS = ["tests/federated_deep/test_deep_building_blocks.py", "tests/federated_deep/test_dp_sgd_accounting.py",
               "tests/federated_deep/test_adaptive_inversion.py"]
DP_SGD = [*DP, "tests/federated_deep/test_adaptive_inversion.py"]
PRUNING = ["tests/federated_deep/test_pruning_count.py", "tests/federated_deep/test_pruning_scope.py",
           "tests/federated_deep/test_deep_building_blocks.py", "tests/federated_deep/test_adaptive_inversion.py"]
DPHE_DEEP = ["tests/federated/test_defense_configs.py", "tests/federated/test_federated_plugins.py",
             "tests/federated_deep/test_imprint.py", "tests/federated_deep/test_deep_matrix.py"]
VIEWS = ["tests/federated_deep/test_imprint.py", "tests/federated_deep/test_deep_matrix.py"]
PATH_LABELS = ["tests/core/test_dataset_labels.py", "tests/core/test_labels.py"]
AUDIT_ALL = [*AUDIT, "tests/ldp_feat/test_ldp_feat_defense.py"]

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
    # Areas C and D: fresh probes, written from the product code only before any test was opened (session s23).
    ('C', "Inverting Gradients' TV term subtracted (eq. 4: + alpha TV(x))", 'plugins/federated/deep/inversion.py',
     'value = value + settings.tv * total_variation(x) / tv_scale',
     'value = value - settings.tv * total_variation(x) / tv_scale', INVERSION),
    ('C', 'cosine distance without ||grad W|| in its denominator (Inverting Gradients eq. 4)', 'plugins/federated/deep/inversion.py',
     'return 1.0 - dot / (torch.sqrt(norm_s) * torch.sqrt(norm_t)).clamp_min(1e-20)',
     'return 1.0 - dot / torch.sqrt(norm_s).clamp_min(1e-20)', INVERSION),
    ('C', "last layer's bias matched on the weight's input width, not its outputs", 'plugins/federated/deep/labels.py',
     'params[names[i + 1]].shape == weight.shape[:1]',
     'params[names[i + 1]].shape == weight.shape[1:]', DEEP_LABELS),
    ('C', 'DP-SGD noise std sigma, not sigma C (Abadi et al. Algorithm 1: N(0, sigma^2 C^2 I))', 'plugins/defenses/dp_sgd.py',
     'noise = torch.randn(summed.shape, generator=generator) * sigma * clip',
     'noise = torch.randn(summed.shape, generator=generator) * sigma', DP_SGD),
    ('C', 'DP-SGD per-example factor not capped at 1 (small gradients scaled up to C)', 'plugins/defenses/dp_sgd.py',
     'factor = (clip / (norms + 1e-12)).clamp(max=1.0)',
     'factor = clip / (norms + 1e-12)', DP_SGD),
    ('C', 'pruning by signed value, not magnitude', 'plugins/defenses/gradient_pruning.py',
     'order = np.argsort(np.abs(update), kind="stable")',
     'order = np.argsort(update, kind="stable")', PRUNING),
    ('C', 'pruned count floored without rounding (0.29 x 100 -> 28)', 'plugins/defenses/gradient_pruning.py',
     'return int(np.floor(round(fraction * size, 9)))',
     'return int(np.floor(fraction * size))', PRUNING),
    ('C', 'prune = 1 accepted (every entry zeroed)', 'plugins/defenses/gradient_pruning.py',
     'prune: float = Field(0.9, ge=0, lt=1,',
     'prune: float = Field(0.9, ge=0, le=1,', PRUNING),
    ('C', 'DPHE runs with N = 2 users (section 2.5 demands N >= 3)', 'plugins/defenses/dphe.py',
     'if n_users < 3 and not cfg.force:',
     'if n_users < 2 and not cfg.force:', DPHE_DEEP),
    ('C', "DPHE deep release carries user 0's plaintext update when no insider observes", 'plugins/defenses/dphe.py',
     'own_update=run.sent[cfg.observer] if cfg.observer is not None else np.zeros(0, np.float32),',
     'own_update=run.sent[cfg.observer] if cfg.observer is not None else run.sent[0],', DPHE_DEEP),
    ('C', "insider's view divided by N, not N - 1 ((N w - w_own) / (N - 1))", 'plugins/federated/deep/views.py',
     '/ max(1, n_users - 1)',
     '/ max(1, n_users)', VIEWS),
    ('C', "captured images' shape error loses the file", 'plugins/federated/deep/captured_files.py',
     'raise InputError(f"images {images_path} have shape {raw.shape};',
     'raise InputError(f"images have shape {raw.shape};', CAPTURED),
    ('C', 'labels file: the last missing id reported, not the first', 'plugins/federated/features/file.py',
     'row, id_ = missing[0]',
     'row, id_ = missing[-1]', FEATURES),
    ('C', 'a setting swept over two values is not an axis (n = 2)', 'harness/labels.py',
     'for f in flat}) > 1)',
     'for f in flat}) > 2)', LABELS),
    ('C', 'path labels: the longest distinguishing setting shown, not the shortest', 'harness/path_labels.py',
     'varying = [min(alone, key=',
     'varying = [max(alone, key=', PATH_LABELS),
    ('D', 'overlap-robust s.e. divides by n^2, not n (n - 1) (Conley 1999)', 'harness/report/paired.py',
     '/ (n * (n - 1))))',
     '/ (n * n)))', PAIRED),
    ('D', 'Bartlett kernel not clipped at 0 (negative weights beyond the bandwidth)', 'harness/report/paired.py',
     'w = np.prod(np.clip(1.0 - dist / bandwidth, 0.0, None), axis=-1)',
     'w = np.prod(1.0 - dist / bandwidth, axis=-1)', PAIRED),
    ('D', 'constant negative paired difference: ratio +inf', 'harness/report/paired.py',
     'return math.copysign(math.inf, self.diff) if self.diff else None',
     'return math.inf if self.diff else None', PAIRED),
    ('D', 'no-defense baseline put at cost 0 on a higher-is-better utility', 'harness/report/frontier.py',
     'if u is None and not u_hib and all(',
     'if u is None and all(', REPORT),
    ('D', 'runner-up may be an attack tied with the strongest', 'harness/report/strongest.py',
     'rest = {a: v for a, v in column.items() if a not in best}',
     'rest = {a: v for a, v in column.items() if a != best[0]}', REPORT),
    ('D', '10000 written fixed-point, not 1e+04 (boundary of _fmt)', 'harness/report/tables.py',
     'if v != 0 and (abs(v) >= 1e4 or abs(v) < 1e-3):',
     'if v != 0 and (abs(v) > 1e4 or abs(v) < 1e-3):', REPORT),
    ('D', '-inf stored as -float max not read back as -inf', 'harness/report/tables.py',
     'return math.copysign(math.inf, value) if abs(value) >= sys.float_info.max else value',
     'return math.copysign(math.inf, value) if value >= sys.float_info.max else value', REPORT),
    ('D', 'no-defense column last, not first', 'harness/report/tables.py',
     'key=lambda s: (s != "none", s))',
     'key=lambda s: (s == "none", s))', REPORT),
    ('D', 'sqlite:///mlflow.db read as the absolute /mlflow.db', 'harness/tracking.py',
     'return Path(path.lstrip("/")) if path else None',
     'return Path(path) if path else None', TRACKING),
    ('D', "heartbeat's first line due at once, not after one interval", 'harness/heartbeat.py',
     'self.start = self.last = self.clock()',
     'self.start = self.clock()\n        self.last = self.start - self.interval', HEARTBEAT),
    ('D', 'claims file: a lease of 0 s becomes the 24 h default', 'harness/claims.py',
     '        self.path = path\n        self.lease_s = lease_s if lease_s is not None else lease_s_default()',
     '        self.path = path\n        self.lease_s = lease_s or lease_s_default()', CLAIMS),
    ('D', 'camera centre -R t, not -R^T t', 'plugins/descriptor_release/localisation/utility.py',
     'centre_est, centre_gt = -rot_est.T @ trans_est, -rot_gt.T @ trans_gt',
     'centre_est, centre_gt = -rot_est @ trans_est, -rot_gt @ trans_gt', LOCALISATION),
    ('D', 'retrieval keeps the reference images with the fewest matches', 'plugins/descriptor_release/localisation/utility.py',
     'keep = np.argsort([-len(m) for m in found], kind="stable")[:retrieval]',
     'keep = np.argsort([len(m) for m in found], kind="stable")[:retrieval]', LOCALISATION),
    ('D', 'Clopper-Pearson lower end at alpha, not alpha / 2', 'plugins/descriptor_release/privacy_audit.py',
     'lo = np.where(k > 0, beta.ppf(alpha / 2,',
     'lo = np.where(k > 0, beta.ppf(alpha,', AUDIT_ALL),
    ('D', 'event measured on the selection half (not independent of the choice)', 'plugins/descriptor_release/privacy_audit.py',
     'k1, k2 = hits(runs[first][1]), hits(runs[second][1])',
     'k1, k2 = hits(runs[first][0]), hits(runs[second][0])', AUDIT_ALL),
]


def line_of(path: Path, text: str) -> int:
    return path.read_text()[: path.read_text().index(text)].count("\n") + 1


def run(area: str, only: str = "") -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    print("area\tmutation\tfile:line\tresult\tkilling test")
    for probe_area, what, file, old, new, tests in PROBES:
        if probe_area != area or only not in what:
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
    run(sys.argv[1] if len(sys.argv) > 1 else "A", sys.argv[2] if len(sys.argv) > 2 else "")
