"""Diagnostic: where the exact budget search (problem 4) spends its nodes on one album.

For one album of a config's ``milp-budget`` cell (album 24 of examples/album.yaml's user
albums by default: 59 photos, d = 14, the album that needs minutes), re-runs the branch
and bound of :mod:`vispriv.plugins.album.budget_search` with the same inputs as
:func:`vispriv.plugins.album.milp.fast_budget`, starting from a given count (the optimum,
so that every node it expands is a node any proof with this bound must expand), and prints:

* the nodes expanded per depth (deletions made) and the time per node;
* at a sample of nodes of depth ``--sample-depth``: the node's bound with the root's
  conflict groups (what the search uses) against the bound from pair conflicts recomputed
  with that node's deletions (the surrogate pair test of
  :func:`vispriv.plugins.album.surrogate.pair_compatibility`, weights 1/4, 1/2, 3/4, on the
  photos still deletable and the deletions left, greedy clique cover as
  :func:`vispriv.plugins.album.budget_search.conflict_groups`), and the time that costs.

    .venv/bin/python benchmarks/album_budget_nodes.py --album 24 --start 124
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import numpy as np
from album_budget_gap import budget_albums

from vispriv.plugins.album.budget_search import _group_layout, _groups_hit, conflict_groups, suffix_relief
from vispriv.plugins.album.pruning import caps
from vispriv.plugins.album.surrogate import PAIR_WEIGHTS, pair_compatibility, worst_totals


def search_inputs(A: np.ndarray, d: int):
    """Candidate photos' advantages on the open places, their totals and the root's groups (as fast_budget)."""
    fixed = np.zeros(len(A), dtype=bool)
    t = len(A) - d
    J = np.flatnonzero(caps(A) >= t)
    places = J[worst_totals(A[:, J], fixed, t, at_least=True) < 0]
    relief = np.minimum(A[:, places], 0.0).sum(axis=1)
    cand = np.flatnonzero(relief < 0)
    cand = cand[np.argsort(relief[cand], kind="stable")]
    groups = conflict_groups(pair_compatibility(A, fixed, places, t), len(places))
    return A[cand][:, places], A[:, places].sum(axis=0), groups


def node_pair_groups(B: np.ndarray, left: np.ndarray, p: int, r: int, possible: np.ndarray) -> int:
    """Number of greedy conflict cliques among the possible places, with pair conflicts
    tested at the node (``left`` totals, at most ``r`` more deletions among rows ``p:``)."""
    cols = np.flatnonzero(possible)
    a, b = np.triu_indices(len(cols), k=1)
    conflict = np.ones(len(a), dtype=bool)
    rest = B[p:]
    for w in PAIR_WEIGHTS:
        s = w * rest[:, cols[a]] + (1 - w) * rest[:, cols[b]]
        best = np.minimum(np.sort(s, axis=0)[:r], 0.0).sum(axis=0)
        conflict &= w * left[cols[a]] + (1 - w) * left[cols[b]] - best < 0
    compatible = np.ones((len(cols), len(cols)), dtype=bool)
    compatible[a[conflict], b[conflict]] = compatible[b[conflict], a[conflict]] = False
    return len(np.unique(conflict_groups(compatible, len(cols))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="examples/album.yaml")
    parser.add_argument("--collection", default="albums")
    parser.add_argument("--album", type=int, default=24)
    parser.add_argument("--start", type=int, default=124, help="count to beat (the optimum: every expanded node is necessary)")
    parser.add_argument("--sample-depth", type=int, default=10)
    parser.add_argument("--samples", type=int, default=20)
    args = parser.parse_args()
    albums, _ = budget_albums(args.config, args.collection)
    A, d, _ = albums[args.album]
    B, tot, groups = search_inputs(A, d)
    n, m = B.shape
    print(f"album {args.album}: {n} candidate photos, {m} open places, d = {d}, root bound {len(np.unique(groups))} groups, beating {args.start}")
    R = suffix_relief(B, d)
    order, n_single, ends = _group_layout(groups)
    depth: Counter = Counter()
    samples = []
    rng = np.random.default_rng(0)
    stack = [(0, np.zeros(m), 0)]
    start = time.perf_counter()
    while stack:
        p, removed, k = stack.pop()
        r = d - k
        if r == 0 or p == n:
            continue
        depth[k] += 1
        left = tot - removed
        if k == args.sample_depth and len(samples) < args.samples and rng.random() < 0.05:
            possible = left - R[p, r] >= 0
            t0 = time.perf_counter()
            refined = node_pair_groups(B, left, p, r, possible)
            samples.append((len(np.unique(groups[possible])), refined, time.perf_counter() - t0))
        children = left[None, :] - B[p:]
        possible = children - R[np.arange(p + 1, n + 1), r - 1] >= 0
        bounds = _groups_hit(possible[:, order], n_single, ends)
        for q in np.flatnonzero(bounds > args.start)[::-1]:
            stack.append((p + int(q) + 1, removed + B[p + q], k + 1))
    seconds = time.perf_counter() - start
    total = sum(depth.values())
    print(f"nodes expanded: {total} in {seconds:.1f} s ({1e6 * seconds / max(total, 1):.0f} us a node, this script's loop)")
    print("per depth: " + ", ".join(f"{k}: {v}" for k, v in sorted(depth.items())))
    if samples:
        s = np.array(samples)
        print(f"{len(s)} nodes of depth {args.sample_depth}: root-group bound median {np.median(s[:, 0]):.0f}, "
              f"node pair-conflict bound median {np.median(s[:, 1]):.0f} (lower by {np.median(s[:, 0] - s[:, 1]):.0f}), "
              f"pruned by it {int(np.sum(s[:, 1] <= args.start))}/{len(s)}, {1e3 * np.median(s[:, 2]):.0f} ms a node")


if __name__ == "__main__":
    main()
